package tasks

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

func ids(tasks []*agentplanev1.Task) []string {
	var out []string
	for _, t := range tasks {
		out = append(out, t.GetTaskId())
	}
	return out
}

// listAll pages through a listing and returns every task id in order.
func (h *harness) listAll(t *testing.T, tenant string, q ListQuery) []string {
	t.Helper()
	var out []string
	for page := 0; ; page++ {
		if page > 100 {
			t.Fatal("paging does not end")
		}
		tasks, next, err := h.m.List(ctx, tenant, q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ids(tasks)...)
		if next == "" {
			return out
		}
		q.PageToken = next
	}
}

func TestList(t *testing.T) {
	h := newHarness(t)
	var newestFirst []string
	var created []time.Time
	for i := range 7 {
		p := params("acme")
		if i%2 == 0 {
			p.Labels = map[string]string{"even": "yes"}
		}
		task := h.start(t, p)
		newestFirst = append([]string{task.GetTaskId()}, newestFirst...)
		created = append(created, h.clock.Now())
		h.clock.Advance(time.Second)
	}
	h.start(t, params("beta"))
	// Cancel the oldest so that a state filter has something to drop.
	if _, err := h.m.Cancel(ctx, "acme", newestFirst[6], "owner", "test", Request{}); err != nil {
		t.Fatal(err)
	}

	for name, tc := range map[string]struct {
		q    ListQuery
		want []string
	}{
		"all, one page":       {ListQuery{}, newestFirst},
		"all, pages of 2":     {ListQuery{PageSize: 2}, newestFirst},
		"pages of 7 (exact)":  {ListQuery{PageSize: 7}, newestFirst},
		"label":               {ListQuery{PageSize: 2, Labels: map[string]string{"even": "yes"}}, []string{newestFirst[0], newestFirst[2], newestFirst[4], newestFirst[6]}},
		"state":               {ListQuery{PageSize: 3, States: []agentplanev1.TaskState{agentplanev1.TaskState_TASK_STATE_CANCELED}}, newestFirst[6:]},
		"created in [t2, t5)": {ListQuery{PageSize: 2, CreatedAfter: created[2], CreatedBefore: created[5]}, newestFirst[2:5]},
		"created after t5":    {ListQuery{CreatedAfter: created[5]}, newestFirst[:2]},
	} {
		t.Run(name, func(t *testing.T) {
			equal(t, "ids", h.listAll(t, "acme", tc.q), tc.want)
		})
	}

	t.Run("tokens are sealed", func(t *testing.T) {
		_, next, err := h.m.List(ctx, "acme", ListQuery{PageSize: 2})
		if err != nil || next == "" {
			t.Fatalf("first page: %q, %v", next, err)
		}
		tampered := []byte(next)
		tampered[len(tampered)-3] ^= 0x01
		for name, tc := range map[string]struct {
			tenant string
			q      ListQuery
		}{
			"other tenant":    {"beta", ListQuery{PageSize: 2, PageToken: next}},
			"changed filters": {"acme", ListQuery{PageSize: 2, PageToken: next, Labels: map[string]string{"even": "yes"}}},
			"tampered":        {"acme", ListQuery{PageSize: 2, PageToken: string(tampered)}},
			"garbage":         {"acme", ListQuery{PageToken: "not a token"}},
		} {
			t.Run(name, func(t *testing.T) {
				_, _, err := h.m.List(ctx, tc.tenant, tc.q)
				wantErr(t, err, codes.InvalidArgument, apierr.ReasonPageTokenInvalid)
			})
		}
	})
	t.Run("bad queries", func(t *testing.T) {
		for _, q := range []ListQuery{{PageSize: -1}, {CreatedAfter: created[3], CreatedBefore: created[1]}} {
			_, _, err := h.m.List(ctx, "acme", q)
			wantErr(t, err, codes.InvalidArgument, 0)
		}
	})
}

func TestListVerdictsAndObligations(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	err := h.m.UpdateTask(ctx, "acme", task.GetTaskId(), func(op *Op) error {
		for seq := int64(1); seq <= 3; seq++ {
			if err := op.Writer().PutVerdict("acme", &storagev1.VerdictRecord{Verdict: &agentplanev1.Verdict{
				VerdictId: "v" + string(rune('0'+seq)), TaskId: task.GetTaskId(), Sequence: seq,
			}}); err != nil {
				return err
			}
			state := agentplanev1.ObligationState_OBLIGATION_STATE_OPEN
			if seq == 2 {
				state = agentplanev1.ObligationState_OBLIGATION_STATE_ADDRESSED
			}
			if err := op.Writer().PutObligation("acme", task.GetTaskId(), &storagev1.ObligationRecord{Ordinal: seq, Obligation: &agentplanev1.Obligation{
				ObligationId: "o" + string(rune('0'+seq)), State: state, CreateTime: timestamppb.New(op.Now()),
			}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var verdicts []string
	token := ""
	for {
		page, next, err := h.m.ListVerdicts(ctx, "acme", task.GetTaskId(), 2, token)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page {
			verdicts = append(verdicts, v.GetVerdictId())
		}
		if next == "" {
			break
		}
		token = next
	}
	equal(t, "verdicts", verdicts, []string{"v1", "v2", "v3"})
	open, next, err := h.m.ListObligations(ctx, "acme", task.GetTaskId(), []agentplanev1.ObligationState{agentplanev1.ObligationState_OBLIGATION_STATE_OPEN}, 0, "")
	if err != nil || next != "" || len(open) != 2 || open[0].GetObligationId() != "o1" || open[1].GetObligationId() != "o3" {
		t.Fatalf("open obligations = %v, %q, %v", open, next, err)
	}
	_, _, err = h.m.ListVerdicts(ctx, "beta", task.GetTaskId(), 0, "")
	wantErr(t, err, codes.NotFound, apierr.ReasonTaskNotFound)
	_, _, err = h.m.ListObligations(ctx, "acme", task.GetTaskId(), nil, 0, "bogus")
	wantErr(t, err, codes.InvalidArgument, apierr.ReasonPageTokenInvalid)
}

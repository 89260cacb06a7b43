package approvals

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/tasks"
)

// rulesConfig governs fs.write (tag io) with rule: finance (alice, bob, carol) and
// treasury (dave) in tenant acme.
func rulesConfig(rule config.ApprovalRule) Config {
	cfg := testConfig()
	cfg.Groups = []config.ApproverGroup{
		{Name: "finance", Tenant: "acme", Principals: []string{"alice", "bob", "carol"}},
		{Name: "treasury", Tenant: "acme", Principals: []string{"dave"}},
	}
	if rule.Name == "" {
		rule.Name = "money"
	}
	rule.Tenant = "acme"
	cfg.Rules = []config.ApprovalRule{rule}
	return cfg
}

func startedBy(p string) startOpt { return func(sp *tasks.StartParams) { sp.Principal = p } }

func (e *env) resolveAs(t testing.TB, principal string, ch hitl.Channel, req *agentplanev1.ResolveInterruptRequest) (*agentplanev1.Interrupt, error) {
	t.Helper()
	return e.svc.ResolveInterrupt(hitl.WithChannel(ctx, ch), "acme", principal, req)
}

func (e *env) mustResolveAs(t testing.TB, principal string, ch hitl.Channel, req *agentplanev1.ResolveInterruptRequest) *agentplanev1.Interrupt {
	t.Helper()
	in, err := e.resolveAs(t, principal, ch, req)
	if err != nil {
		t.Fatalf("%s resolving: %v", principal, err)
	}
	return in
}

func voters(as []*agentplanev1.Approval) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.GetPrincipal()+"@"+a.GetChannel())
	}
	return out
}

func wantPending(t testing.TB, in *agentplanev1.Interrupt, approvals []string, needed int32) {
	t.Helper()
	if in.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_PENDING || in.GetDecision() != nil {
		t.Fatalf("interrupt is %v with decision %v, want pending", in.GetState(), in.GetDecision())
	}
	rq := in.GetRequirement()
	if got := voters(rq.GetApprovals()); !slices.Equal(got, approvals) {
		t.Fatalf("approvals = %v, want %v", got, approvals)
	}
	if rq.GetApprovalsNeeded() != needed {
		t.Fatalf("approvals_needed = %d, want %d", rq.GetApprovalsNeeded(), needed)
	}
}

func TestQuorumTwoOfGroupRunsTheCallOnTheSecondApproval(t *testing.T) {
	e := newEnv(t, rulesConfig(config.ApprovalRule{Tags: []string{"io"}, Group: "finance", Quorum: 2}))
	ref := e.startAndLease(t, "acme")
	in := e.gated(t, ref, "c1")
	rq := in.GetRequirement()
	if rq.GetRule() != "money" || rq.GetGroup() != "finance" || rq.GetQuorum() != 2 || rq.GetStartedBy() != "owner" || !rq.GetSeparationOfDuties() {
		t.Fatalf("requirement = %v", rq)
	}
	first := e.mustResolveAs(t, "alice", hitl.ChannelConsole, approve(in.GetInterruptId()))
	wantPending(t, first, []string{"alice@console"}, 1)
	if got := first.GetRequirement().GetEligible(); !slices.Equal(got, []string{"bob", "carol"}) {
		t.Fatalf("eligible = %v, want [bob carol]", got)
	}
	// Not met: the runtime may not run the call, and the task still waits.
	a := args(t, map[string]any{"path": "/tmp/c1", "data": "x"})
	wantErr(t, e.report(ref, "c1", "fs.write", a), codes.FailedPrecondition, apierr.ReasonToolCallNotApproved)
	if st := e.task(t, "acme", ref.GetTaskId()).GetState(); st != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED {
		t.Fatalf("task %v after one of two approvals, want INPUT_REQUIRED", st)
	}
	// Durable: what a restart reads back.
	e.restart(t)
	got, err := e.svc.GetInterrupt(ctx, "acme", in.GetInterruptId())
	if err != nil {
		t.Fatal(err)
	}
	wantPending(t, got, []string{"alice@console"}, 1)

	done := e.mustResolveAs(t, "bob", hitl.ChannelSlack, approve(in.GetInterruptId()))
	d := done.GetDecision()
	if done.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED || d.GetType() != agentplanev1.DecisionType_DECISION_TYPE_APPROVE ||
		d.GetDecidedBy() != "bob" || d.GetChannel() != "slack" || d.GetArgsDigest() != in.GetArgsDigest() {
		t.Fatalf("after the second approval: %v", done)
	}
	if got := voters(done.GetRequirement().GetApprovals()); !slices.Equal(got, []string{"alice@console", "bob@slack"}) {
		t.Fatalf("approvals = %v", got)
	}
	if err := e.report(ref, "c1", "fs.write", a); err != nil {
		t.Fatalf("the approved call: %v", err)
	}
}

func TestQuorumOnePersonCountsOnceWhateverChannel(t *testing.T) {
	e := newEnv(t, rulesConfig(config.ApprovalRule{Group: "finance", Quorum: 2}))
	ref := e.startAndLease(t, "acme")
	in := e.gated(t, ref, "c1")
	req := approve(in.GetInterruptId())
	req.RequestId = "r-alice"
	e.mustResolveAs(t, "alice", hitl.ChannelConsole, req)
	// A retried request is one decision: it answers the interrupt as it is.
	again := e.mustResolveAs(t, "alice", hitl.ChannelConsole, proto.CloneOf(req))
	wantPending(t, again, []string{"alice@console"}, 1)
	// Another person's request under alice's request id is refused, not taken for hers.
	_, err := e.resolveAs(t, "bob", hitl.ChannelConsole, proto.CloneOf(req))
	wantErr(t, err, codes.AlreadyExists, apierr.ReasonRequestIDReused)
	for _, ch := range []hitl.Channel{hitl.ChannelConsole, hitl.ChannelSlack, hitl.ChannelLink, hitl.ChannelCtl} {
		_, err := e.resolveAs(t, "alice", ch, approve(in.GetInterruptId()))
		wantErr(t, err, codes.FailedPrecondition, apierr.ReasonAlreadyVoted)
		_, err = e.resolveAs(t, "alice", ch, reject(in.GetInterruptId(), "changed my mind"))
		wantErr(t, err, codes.FailedPrecondition, apierr.ReasonAlreadyVoted)
	}
	wantPending(t, e.mustGet(t, in.GetInterruptId()), []string{"alice@console"}, 1)
}

func (e *env) mustGet(t testing.TB, id string) *agentplanev1.Interrupt {
	t.Helper()
	in, err := e.svc.GetInterrupt(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestSeparationOfDutiesRefusesTheStarterOnEveryChannel(t *testing.T) {
	e := newEnv(t, rulesConfig(config.ApprovalRule{Group: "finance", Quorum: 1}))
	ref := e.startAndLease(t, "acme", startedBy("alice"))
	in := e.gated(t, ref, "c1")
	for _, ch := range []hitl.Channel{hitl.ChannelAPI, hitl.ChannelCtl, hitl.ChannelConsole, hitl.ChannelSlack, hitl.ChannelLink, hitl.ChannelEmail} {
		for _, req := range []*agentplanev1.ResolveInterruptRequest{approve(in.GetInterruptId()), reject(in.GetInterruptId(), "no"),
			edit(in.GetInterruptId(), `{"path":"/tmp/other"}`)} {
			_, err := e.resolveAs(t, "alice", ch, req)
			wantErr(t, err, codes.PermissionDenied, apierr.ReasonApproverNotEligible)
		}
	}
	got := e.mustGet(t, in.GetInterruptId())
	wantPending(t, got, nil, 1)
	if el := got.GetRequirement().GetEligible(); !slices.Equal(el, []string{"bob", "carol"}) {
		t.Fatalf("eligible = %v, want the group without its starter", el)
	}
	e.mustResolveAs(t, "bob", hitl.ChannelAPI, approve(in.GetInterruptId()))
}

func TestSeparationOfDutiesCanBeTurnedOff(t *testing.T) {
	off := false
	e := newEnv(t, rulesConfig(config.ApprovalRule{Group: "finance", SeparationOfDuties: &off}))
	ref := e.startAndLease(t, "acme", startedBy("alice"))
	in := e.gated(t, ref, "c1")
	if out := e.mustResolveAs(t, "alice", hitl.ChannelAPI, approve(in.GetInterruptId())); out.GetDecision().GetDecidedBy() != "alice" {
		t.Fatalf("decision %v", out.GetDecision())
	}
}

func TestRuleGroupRefusesOutsiders(t *testing.T) {
	e := newEnv(t, rulesConfig(config.ApprovalRule{Group: "finance"}))
	ref := e.startAndLease(t, "acme")
	in := e.gated(t, ref, "c1")
	_, err := e.resolveAs(t, "mallory", hitl.ChannelAPI, approve(in.GetInterruptId()))
	wantErr(t, err, codes.PermissionDenied, apierr.ReasonApproverNotEligible)
	// The escalation group is not asked before escalation.
	_, err = e.resolveAs(t, "dave", hitl.ChannelAPI, approve(in.GetInterruptId()))
	wantErr(t, err, codes.PermissionDenied, apierr.ReasonApproverNotEligible)
}

func TestQuorumEditRestartsTheCount(t *testing.T) {
	e := newEnv(t, rulesConfig(config.ApprovalRule{Group: "finance", Quorum: 2}))
	ref := e.startAndLease(t, "acme")
	in := e.gated(t, ref, "c1")
	id := in.GetInterruptId()
	e.mustResolveAs(t, "alice", hitl.ChannelAPI, approve(id))
	newArgs := `{"path":"/tmp/safer"}`
	edited := e.mustResolveAs(t, "bob", hitl.ChannelConsole, edit(id, newArgs))
	wantPending(t, edited, []string{"bob@console"}, 1)
	rq := edited.GetRequirement()
	if rq.GetEditedArgumentsJson() != newArgs || rq.GetReviewArgsDigest() != hitl.ArgsDigest(newArgs) || edited.GetArgsDigest() != in.GetArgsDigest() {
		t.Fatalf("after the edit: %v", edited)
	}
	// An approval of the old arguments is refused: the reviewer saw other ones.
	stale := approve(id)
	stale.ArgsDigest = in.GetArgsDigest()
	_, err := e.resolveAs(t, "carol", hitl.ChannelAPI, stale)
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonArgsMismatch)
	// alice's approval was of the old arguments: she counts again, for the new ones.
	fresh := approve(id)
	fresh.ArgsDigest = hitl.ArgsDigest(newArgs)
	done := e.mustResolveAs(t, "alice", hitl.ChannelAPI, fresh)
	d := done.GetDecision()
	if d.GetType() != agentplanev1.DecisionType_DECISION_TYPE_EDIT || d.GetArgumentsJson() != newArgs || d.GetArgsDigest() != hitl.ArgsDigest(newArgs) {
		t.Fatalf("decision = %v, want an EDIT running the approved arguments", d)
	}
	wantErr(t, e.report(ref, "c1", "fs.write", args(t, map[string]any{"path": "/tmp/c1", "data": "x"})), codes.FailedPrecondition, apierr.ReasonToolCallNotApproved)
	if err := e.report(ref, "c1", "fs.write", newArgs); err != nil {
		t.Fatalf("the edited call: %v", err)
	}
}

func TestQuorumOneRejectRejects(t *testing.T) {
	e := newEnv(t, rulesConfig(config.ApprovalRule{Group: "finance", Quorum: 2}))
	ref := e.startAndLease(t, "acme")
	in := e.gated(t, ref, "c1")
	e.mustResolveAs(t, "alice", hitl.ChannelAPI, approve(in.GetInterruptId()))
	done := e.mustResolveAs(t, "bob", hitl.ChannelAPI, reject(in.GetInterruptId(), "not this quarter"))
	if d := done.GetDecision(); d.GetType() != agentplanev1.DecisionType_DECISION_TYPE_REJECT || d.GetDecidedBy() != "bob" {
		t.Fatalf("decision = %v", d)
	}
	// The rejected call is reported with the model's arguments, and does not run.
	if err := e.report(ref, "c1", "fs.write", args(t, map[string]any{"path": "/tmp/c1", "data": "x"})); err != nil {
		t.Fatal(err)
	}
}

func TestRejectQuorum(t *testing.T) {
	e := newEnv(t, rulesConfig(config.ApprovalRule{Group: "finance", Quorum: 3, RejectQuorum: 2}))
	ref := e.startAndLease(t, "acme")
	in := e.gated(t, ref, "c1")
	id := in.GetInterruptId()
	one := e.mustResolveAs(t, "alice", hitl.ChannelAPI, reject(id, "too much"))
	wantPending(t, one, nil, 3)
	if got := voters(one.GetRequirement().GetRejections()); !slices.Equal(got, []string{"alice@api"}) {
		t.Fatalf("rejections = %v", got)
	}
	e.mustResolveAs(t, "bob", hitl.ChannelAPI, approve(id))
	done := e.mustResolveAs(t, "carol", hitl.ChannelAPI, reject(id, "agreed, too much"))
	if done.GetDecision().GetType() != agentplanev1.DecisionType_DECISION_TYPE_REJECT {
		t.Fatalf("decision = %v", done.GetDecision())
	}
}

func TestRuleSelection(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule config.ApprovalRule
		want bool
	}{
		{"tag", config.ApprovalRule{Tags: []string{"io"}}, true},
		{"other tag", config.ApprovalRule{Tags: []string{"money"}}, false},
		{"tool", config.ApprovalRule{Tools: []string{"fs.write"}}, true},
		{"other tool", config.ApprovalRule{Tools: []string{"pay"}}, false},
		{"expression", config.ApprovalRule{Expression: `args.path.startsWith("/tmp/")`}, true},
		{"false expression", config.ApprovalRule{Expression: `args.path == "/etc/passwd"`}, false},
		{"failing expression applies", config.ApprovalRule{Expression: `args.missing == 1`}, true},
		{"all of them", config.ApprovalRule{Tags: []string{"io"}, Tools: []string{"fs.write"}, Expression: `false`}, false},
		{"none: every call", config.ApprovalRule{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, rulesConfig(tc.rule))
			in := e.gated(t, e.startAndLease(t, "acme"), "c1")
			if got := in.GetRequirement() != nil; got != tc.want {
				t.Fatalf("rule applies = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("another tenant's rule", func(t *testing.T) {
		e := newEnv(t, rulesConfig(config.ApprovalRule{}))
		if in := e.gated(t, e.startAndLease(t, "globex"), "c1"); in.GetRequirement() != nil {
			t.Fatalf("acme's rule applied in globex: %v", in.GetRequirement())
		}
	})
	t.Run("a bad expression stops New", func(t *testing.T) {
		if _, err := NewRules(nil, []config.ApprovalRule{{Name: "x", Expression: "args."}}); err == nil {
			t.Fatal("NewRules accepted a broken expression")
		}
	})
}

func auditRows(t testing.TB, e *env, req *agentplanev1.ListAuditRecordsRequest) ([]string, string) {
	t.Helper()
	resp, err := e.svc.ListAuditRecords(ctx, "acme", req)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range resp.GetRecords() {
		row := r.GetPrincipal() + " " + r.GetChannel() + " " + r.GetAction().String()[len("AUDIT_ACTION_"):]
		if r.GetResolved() {
			row += " resolved"
		}
		out = append(out, row)
	}
	return out, resp.GetNextPageToken()
}

func TestAuditRecordsEveryDecisionWithItsChannel(t *testing.T) {
	e := newEnv(t, rulesConfig(config.ApprovalRule{Tools: []string{"fs.write"}, Group: "finance", Quorum: 2}))
	ref := e.startAndLease(t, "acme")
	in := e.gated(t, ref, "c1")
	e.mustResolveAs(t, "alice", hitl.ChannelConsole, approve(in.GetInterruptId()))
	e.clock.Advance(time.Minute)
	r := reject(in.GetInterruptId(), "no")
	r.RequestId = "req-1"
	e.mustResolveAs(t, "bob", hitl.ChannelCtl, r)
	rows, _ := auditRows(t, e, &agentplanev1.ListAuditRecordsRequest{})
	want := []string{"alice console APPROVE", "bob ctl REJECT resolved"}
	if !slices.Equal(rows[:2], want) {
		t.Fatalf("audit = %v, want %v first", rows, want)
	}
	resp, err := e.svc.ListAuditRecords(ctx, "acme", &agentplanev1.ListAuditRecordsRequest{InterruptId: in.GetInterruptId()})
	if err != nil {
		t.Fatal(err)
	}
	bob := resp.GetRecords()[1]
	if bob.GetArgsDigest() != in.GetArgsDigest() || bob.GetReason() != "no" || bob.GetRequestId() != "req-1" || bob.GetRule() != "money" ||
		bob.GetTaskId() != ref.GetTaskId() || bob.GetToolName() != "fs.write" || !bob.GetTime().AsTime().Equal(e.clock.Now()) {
		t.Fatalf("bob's record = %v", bob)
	}
	// Another tenant sees none of it.
	other, err := e.svc.ListAuditRecords(ctx, "globex", &agentplanev1.ListAuditRecordsRequest{})
	if err != nil || len(other.GetRecords()) != 0 {
		t.Fatalf("globex's audit = %v, %v", other.GetRecords(), err)
	}
}

func TestAuditPagingAndSince(t *testing.T) {
	e := newEnv(t, testConfig())
	var ids []string
	ref := e.startAndLease(t, "acme")
	for i := range 5 {
		in := e.gated(t, ref, "c"+string(rune('a'+i)))
		e.mustResolveAs(t, "owner", hitl.ChannelAPI, approve(in.GetInterruptId()))
		ids = append(ids, in.GetInterruptId())
		if i == 2 {
			e.clock.Advance(10 * time.Minute) // within the lease
		}
	}
	var all []string
	token := ""
	pages := 0
	for {
		resp, err := e.svc.ListAuditRecords(ctx, "acme", &agentplanev1.ListAuditRecordsRequest{PageSize: 2, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range resp.GetRecords() {
			all = append(all, r.GetInterruptId())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if !slices.Equal(all, ids) || pages != 3 {
		t.Fatalf("paged = %v in %d pages, want %v in 3", all, pages, ids)
	}
	since := timestamppb.New(e.clock.Now().Add(-time.Minute))
	resp, err := e.svc.ListAuditRecords(ctx, "acme", &agentplanev1.ListAuditRecordsRequest{Since: since})
	if err != nil || len(resp.GetRecords()) != 2 || resp.GetRecords()[0].GetInterruptId() != ids[3] {
		t.Fatalf("since: %v, %v", resp.GetRecords(), err)
	}
	// A token is bound to its filters.
	first, _ := e.svc.ListAuditRecords(ctx, "acme", &agentplanev1.ListAuditRecordsRequest{PageSize: 1})
	_, err = e.svc.ListAuditRecords(ctx, "acme", &agentplanev1.ListAuditRecordsRequest{PageSize: 1, PageToken: first.GetNextPageToken(), Since: since})
	wantErr(t, err, codes.InvalidArgument, apierr.ReasonPageTokenInvalid)
	_, err = e.svc.ListAuditRecords(ctx, "globex", &agentplanev1.ListAuditRecordsRequest{PageToken: first.GetNextPageToken()})
	wantErr(t, err, codes.InvalidArgument, apierr.ReasonPageTokenInvalid)
}

func TestDeadlineDecisionIsAudited(t *testing.T) {
	cfg := testConfig()
	cfg.DefaultTimeout = time.Minute
	e := newEnv(t, cfg)
	in := e.gated(t, e.startAndLease(t, "acme"), "c1")
	e.clock.Advance(2 * time.Minute)
	if _, err := e.svc.ApplyDeadlines(ctx); err != nil {
		t.Fatal(err)
	}
	rows, _ := auditRows(t, e, &agentplanev1.ListAuditRecordsRequest{InterruptId: in.GetInterruptId()})
	if !slices.Equal(rows, []string{"system system REJECT resolved"}) {
		t.Fatalf("audit = %v", rows)
	}
}

func TestEscalationTimersSurviveARestart(t *testing.T) {
	cfg := rulesConfig(config.ApprovalRule{Group: "finance", Quorum: 2, Escalation: config.Escalation{
		RemindAfter: config.Duration(10 * time.Minute), EscalateAfter: config.Duration(20 * time.Minute), EscalateTo: "treasury",
	}})
	cfg.DefaultTimeout = 30 * time.Minute
	e := newEnv(t, cfg)
	in := e.gated(t, e.startAndLease(t, "acme"), "c1")
	rq := in.GetRequirement()
	if !rq.GetRemindTime().AsTime().Equal(e.clock.Now().Add(10*time.Minute)) || !rq.GetEscalateTime().AsTime().Equal(e.clock.Now().Add(20*time.Minute)) ||
		rq.GetEscalationGroup() != "treasury" {
		t.Fatalf("requirement = %v", rq)
	}
	e.mustResolveAs(t, "alice", hitl.ChannelAPI, approve(in.GetInterruptId()))
	if n, _, err := e.svc.ApplyEscalations(ctx); err != nil || n != 0 {
		t.Fatalf("before any timer: %d steps, %v", n, err)
	}

	// The control plane is down when the reminder falls due; the loop of the next one
	// runs it, from what the store holds.
	e.close()
	e.clock.Advance(11 * time.Minute)
	e.open(t)
	e.svc.Start()
	waitFor(t, "the reminder", func() bool {
		return e.record(t, "acme", in.GetInterruptId()).GetInterrupt().GetRequirement().GetReminded()
	})
	rec := e.record(t, "acme", in.GetInterruptId()).GetInterrupt()
	if rec.GetRequirement().GetEscalated() || rec.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
		t.Fatalf("after the reminder: %v", rec)
	}
	_, err := e.resolveAs(t, "dave", hitl.ChannelAPI, approve(in.GetInterruptId()))
	wantErr(t, err, codes.PermissionDenied, apierr.ReasonApproverNotEligible)

	e.close()
	e.clock.Advance(10 * time.Minute)
	e.open(t)
	e.svc.Start()
	waitFor(t, "the escalation", func() bool {
		return e.record(t, "acme", in.GetInterruptId()).GetInterrupt().GetRequirement().GetEscalated()
	})
	got := e.mustGet(t, in.GetInterruptId())
	if el := got.GetRequirement().GetEligible(); !slices.Equal(el, []string{"bob", "carol", "dave"}) {
		t.Fatalf("eligible after escalation = %v, want the escalation group added", el)
	}
	rows, _ := auditRows(t, e, &agentplanev1.ListAuditRecordsRequest{InterruptId: in.GetInterruptId()})
	if !slices.Equal(rows, []string{"alice api APPROVE", "system system REMIND", "system system ESCALATE"}) {
		t.Fatalf("audit = %v", rows)
	}
	// Each step runs once, however often the timers are looked at.
	if n, _, err := e.svc.ApplyEscalations(ctx); err != nil || n != 0 {
		t.Fatalf("again: %d steps, %v", n, err)
	}
	done := e.mustResolveAs(t, "dave", hitl.ChannelAPI, approve(in.GetInterruptId()))
	if done.GetDecision().GetDecidedBy() != "dave" || done.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED {
		t.Fatalf("the escalation group's approval: %v", done)
	}
}

func TestEscalationThenDeadlineDefault(t *testing.T) {
	cfg := rulesConfig(config.ApprovalRule{Group: "finance", Escalation: config.Escalation{
		EscalateAfter: config.Duration(5 * time.Minute), EscalateTo: "treasury",
	}})
	cfg.DefaultTimeout = 10 * time.Minute
	e := newEnv(t, cfg)
	in := e.gated(t, e.startAndLease(t, "acme"), "c1")
	e.clock.Advance(6 * time.Minute)
	if n, next, err := e.svc.ApplyEscalations(ctx); err != nil || n != 1 || !next.IsZero() {
		t.Fatalf("escalation: %d steps, next %v, %v", n, next, err)
	}
	e.clock.Advance(5 * time.Minute)
	if _, err := e.svc.ApplyDeadlines(ctx); err != nil {
		t.Fatal(err)
	}
	got := e.mustGet(t, in.GetInterruptId())
	if d := got.GetDecision(); d.GetSource() != agentplanev1.DecisionSource_DECISION_SOURCE_DEADLINE || d.GetType() != agentplanev1.DecisionType_DECISION_TYPE_REJECT {
		t.Fatalf("decision = %v, want the deadline's default", d)
	}
	rows, _ := auditRows(t, e, &agentplanev1.ListAuditRecordsRequest{InterruptId: in.GetInterruptId()})
	if !slices.Equal(rows, []string{"system system ESCALATE", "system system REJECT resolved"}) {
		t.Fatalf("audit = %v", rows)
	}
}

// TestDocumentedRulesLoad: the configuration docs/hitl.md shows validates and compiles.
func TestDocumentedRulesLoad(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/hitl.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "## Approval rules")
	_, block, ok2 := strings.Cut(after, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/hitl.md has no yaml block under Approval rules")
	}
	cfg := config.Default()
	if err := config.Parse([]byte(block), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewRules(cfg.HITL.Groups, cfg.HITL.Rules); err != nil || len(cfg.HITL.Rules) != 3 {
		t.Fatalf("%d rules: %v", len(cfg.HITL.Rules), err)
	}
}

func TestDeadlineUnderARuleRejectsEvenWhenTheDefaultApproves(t *testing.T) {
	cfg := rulesConfig(config.ApprovalRule{Group: "finance", Quorum: 2})
	cfg.DefaultTimeout, cfg.DeadlineApprove = time.Minute, true
	e := newEnv(t, cfg)
	ref := e.startAndLease(t, "acme")
	in := e.gated(t, ref, "c1")
	e.mustResolveAs(t, "alice", hitl.ChannelAPI, approve(in.GetInterruptId()))
	e.clock.Advance(2 * time.Minute)
	if _, err := e.svc.ApplyDeadlines(ctx); err != nil {
		t.Fatal(err)
	}
	if d := e.mustGet(t, in.GetInterruptId()).GetDecision(); d.GetType() != agentplanev1.DecisionType_DECISION_TYPE_REJECT ||
		d.GetSource() != agentplanev1.DecisionSource_DECISION_SOURCE_DEADLINE {
		t.Fatalf("deadline under the rule: %v, want a rejection", d)
	}
}

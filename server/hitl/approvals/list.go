package approvals

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"slices"
	"strconv"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/pagetoken"
)

// scanBudgetPerItem bounds the entries one page examines per item it may return, so
// that a filter matching little cannot make one call read the whole inbox; a short
// page with a next_page_token then continues the scan.
const scanBudgetPerItem = 20

// ListInterrupts is tenant's inbox: interrupts oldest first, filtered by kind (tool
// approvals unless kinds says otherwise), state (pending unless states says
// otherwise), task, tool, tag and minimum age, and paged with sealed tokens (bound to
// the tenant and the filters; they survive restarts). Overdue deadlines are applied
// first, so the inbox never shows an interrupt whose deadline has passed. Resolved
// interrupts (and those closed with their task) are listed per task and need task_id:
// the store keeps no tenant-wide index of decided interrupts.
func (s *Service) ListInterrupts(ctx context.Context, tenant string, req *agentplanev1.ListInterruptsRequest) (*agentplanev1.ListInterruptsResponse, error) {
	size, err := pagetoken.PageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	var minAge time.Duration
	if ma := req.GetMinAge(); ma != nil {
		if err := ma.CheckValid(); err != nil || ma.AsDuration() < 0 {
			return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "min_age must be a non-negative duration")
		}
		minAge = ma.AsDuration()
	}
	f := filter{tool: req.GetToolName(), tag: req.GetTag(), before: s.clock.Now().Add(-minAge), ageBound: minAge > 0}
	if f.kinds, err = kindsFilter(req.GetKinds()); err != nil {
		return nil, err
	}
	if f.pending, f.resolved, err = statesFilter(req.GetStates()); err != nil {
		return nil, err
	}
	if f.resolved && req.GetTaskId() == "" {
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument,
			"states RESOLVED needs task_id: decided interrupts are listed per task (the inbox holds pending ones)")
	}
	scope := pagetoken.Scope("interrupts", tenant, req.GetTaskId(), req.GetToolName(), req.GetTag(),
		strconv.FormatInt(int64(minAge), 10), f.key())
	cursor, err := s.tokens.Open(scope, req.GetPageToken())
	if err != nil {
		return nil, err
	}
	if _, err := s.applyDue(ctx, tenant); err != nil {
		return nil, err
	}
	var out []*agentplanev1.Interrupt
	var next []byte
	if req.GetTaskId() != "" {
		out, next, err = s.listTask(ctx, tenant, req.GetTaskId(), f, cursor, size)
	} else {
		out, next, err = s.listInbox(ctx, tenant, f, cursor, size)
	}
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	for i, in := range out {
		out[i] = s.decorate(in, now)
	}
	return &agentplanev1.ListInterruptsResponse{Interrupts: out, NextPageToken: s.tokens.Seal(scope, next)}, nil
}

// kindsFilter is the set of kinds a request lists: what a person approves (tool
// approvals and model-call approvals) when it names none.
func kindsFilter(kinds []agentplanev1.InterruptKind) ([]agentplanev1.InterruptKind, error) {
	if len(kinds) == 0 {
		return []agentplanev1.InterruptKind{agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL, agentplanev1.InterruptKind_INTERRUPT_KIND_MODEL_CALL_APPROVAL}, nil
	}
	out := make([]agentplanev1.InterruptKind, 0, len(kinds))
	for _, k := range kinds {
		switch k {
		case agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL, agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE,
			agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED, agentplanev1.InterruptKind_INTERRUPT_KIND_MODEL_CALL_APPROVAL:
		default:
			return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "kinds: %v is not an interrupt kind", k)
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}

// statesFilter says which states a request lists: pending ones when it names none.
func statesFilter(states []agentplanev1.InterruptState) (pending, resolved bool, err error) {
	if len(states) == 0 {
		return true, false, nil
	}
	for _, st := range states {
		switch st {
		case agentplanev1.InterruptState_INTERRUPT_STATE_PENDING:
			pending = true
		case agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED:
			resolved = true
		default:
			return false, false, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "states: %v is not an interrupt state", st)
		}
	}
	return pending, resolved, nil
}

type filter struct {
	kinds     []agentplanev1.InterruptKind
	pending   bool
	resolved  bool
	tool, tag string
	// before: only interrupts raised at or before it, when ageBound.
	before   time.Time
	ageBound bool
}

// key is the kinds and states of f, for the page token's scope.
func (f filter) key() string {
	b := []byte(strconv.FormatBool(f.pending) + "," + strconv.FormatBool(f.resolved))
	for _, k := range f.kinds {
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(k), 10)
	}
	return string(b)
}

// matches reports whether rec passes f's kind, tool, tag and age filters (the state
// filter is the listing's: see listInbox and listTask).
func (f filter) matches(rec *storagev1.InterruptRecord) bool {
	req := rec.GetInterrupt().GetApproval()
	switch {
	case !slices.Contains(f.kinds, rec.GetInterrupt().GetKind()):
		return false
	case f.tool != "" && req.GetToolName() != f.tool:
		return false
	case f.tag != "" && !slices.Contains(req.GetContext().GetTags(), f.tag):
		return false
	case f.ageBound && rec.GetCreateTime().AsTime().After(f.before):
		return false
	}
	return true
}

// listInbox pages the tenant's pending-interrupt index (f.pending is set: a request
// for resolved ones names a task).
func (s *Service) listInbox(ctx context.Context, tenant string, f filter, cursor []byte, size int) ([]*agentplanev1.Interrupt, []byte, error) {
	var out []*agentplanev1.Interrupt
	var resume []byte
	more := false
	budget := size * scanBudgetPerItem
	r := store.IndexRange{After: cursor}
	if f.ageBound {
		// The index is ordered by creation time, so the age bound ends the scan.
		r.Until = f.before
	}
	err := s.store.View(ctx, func(rd store.Reader) error {
		out, resume, more = nil, nil, false
		examined := 0
		return rd.ScanIndex(store.IndexPendingInterrupts, tenant, r, func(e store.IndexEntry) (bool, error) {
			if len(out) == size || examined == budget {
				more = true
				return false, nil
			}
			examined++
			rec, err := rd.GetInterrupt(tenant, e.ID)
			if err != nil {
				return false, err
			}
			if f.matches(rec) {
				out = append(out, rec.GetInterrupt())
			}
			resume = e.Cursor
			return true, nil
		})
	})
	if err != nil || !more {
		return out, nil, err
	}
	return out, resume, nil
}

// listTask pages one task's interrupts by (creation time, id). A task holds few
// interrupts, so they are read whole and sorted; the cursor is the last one returned.
func (s *Service) listTask(ctx context.Context, tenant, taskID string, f filter, cursor []byte, size int) ([]*agentplanev1.Interrupt, []byte, error) {
	var recs []*storagev1.InterruptRecord
	err := s.store.View(ctx, func(r store.Reader) error {
		recs = nil
		return r.ScanTaskInterrupts(tenant, taskID, func(rec *storagev1.InterruptRecord) (bool, error) {
			if hitl.DecidedAtCheck(rec.GetInterrupt()) {
				return true, nil // not an interrupt: see getInterrupt
			}
			pending := rec.GetInterrupt().GetState() == agentplanev1.InterruptState_INTERRUPT_STATE_PENDING && rec.GetClosedReason() == ""
			if (pending && f.pending || !pending && f.resolved) && f.matches(rec) {
				recs = append(recs, rec)
			}
			return true, nil
		})
	})
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(recs, func(a, b *storagev1.InterruptRecord) int {
		return bytes.Compare(taskCursor(a), taskCursor(b))
	})
	start := 0
	if cursor != nil {
		start, _ = slices.BinarySearchFunc(recs, cursor, func(rec *storagev1.InterruptRecord, c []byte) int {
			return cmp.Compare(string(taskCursor(rec)), string(c))
		})
		if start < len(recs) && bytes.Equal(taskCursor(recs[start]), cursor) {
			start++
		}
	}
	end := min(start+size, len(recs))
	out := make([]*agentplanev1.Interrupt, 0, end-start)
	for _, rec := range recs[start:end] {
		out = append(out, rec.GetInterrupt())
	}
	if end == len(recs) {
		return out, nil, nil
	}
	return out, taskCursor(recs[end-1]), nil
}

// taskCursor orders a task's interrupts: creation time (big-endian, non-negative
// Unix nanoseconds), then id.
func taskCursor(rec *storagev1.InterruptRecord) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(max(rec.GetCreateTime().AsTime().UnixNano(), 0)))
	return append(b, rec.GetInterrupt().GetInterruptId()...)
}

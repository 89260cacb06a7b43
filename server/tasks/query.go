package tasks

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/pagetoken"
)

const (
	// maxScanPerPage bounds the tasks one ListTasks page examines, so that a filter that
	// matches little cannot make one call scan a whole tenant; the page then comes back
	// short, with a token to go on.
	maxScanPerPage = 5000
)

// pageSize is the page size of a request's page_size (pagetoken.PageSize: the sizes
// every List RPC shares). n comes from an int32 field.
func pageSize(n int) (int, error) { return pagetoken.PageSize(int32(n)) }

// Get returns one task of tenant in view; another tenant's task is NOT_FOUND like a
// missing one.
func (m *Manager) Get(ctx context.Context, tenant, taskID string, view View) (*agentplanev1.Task, error) {
	var task *agentplanev1.Task
	err := m.store.View(ctx, func(r store.Reader) error {
		rec, err := r.GetTask(tenant, taskID)
		if err != nil {
			return err
		}
		spec, err := readSpec(r, tenant, taskID, view)
		if err != nil {
			return err
		}
		task = toAPITask(rec, spec, view)
		return nil
	})
	return task, err
}

// readSpec reads what view shows of a task's spec record: never the resolved spec (a
// runtime's, in its lease), and the submitted one only in the full view. What is not
// shown is skipped undecoded.
func readSpec(r store.Reader, tenant, taskID string, view View) (*storagev1.TaskSpecRecord, error) {
	return r.GetTaskSpecPartial(tenant, taskID, view != ViewBasic)
}

// ListQuery filters and pages List.
type ListQuery struct {
	// PageSize: 0 means 50; capped at 500.
	PageSize int
	// PageToken continues an earlier listing with the same filters.
	PageToken string
	// States keeps tasks in one of them; empty keeps all.
	States []agentplanev1.TaskState
	// Labels keeps tasks carrying all of them.
	Labels map[string]string
	// Queue keeps tasks of that run queue; "" keeps all.
	Queue string
	// CreatedAfter keeps tasks created at or after it; CreatedBefore, before it (zero:
	// no bound).
	CreatedAfter, CreatedBefore time.Time
	// View is how much of each task to return (UNSPECIFIED: full). It is not part of
	// the token's scope: pages of one listing may be read in different views.
	View View
}

// scope binds a page token to the tenant and the filters.
func (q ListQuery) scope(tenant string) []byte {
	parts := []string{"tasks", tenant, strconv.FormatInt(q.CreatedAfter.UnixNano(), 10), strconv.FormatInt(q.CreatedBefore.UnixNano(), 10)}
	states := slices.Clone(q.States)
	slices.Sort(states)
	for _, s := range slices.Compact(states) {
		parts = append(parts, "s"+strconv.Itoa(int(s)))
	}
	keys := make([]string, 0, len(q.Labels))
	for k := range q.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		parts = append(parts, "l", k, q.Labels[k])
	}
	if q.Queue != "" {
		parts = append(parts, "q", q.Queue)
	}
	return pagetoken.Scope(parts...)
}

func (q ListQuery) matches(rec *storagev1.TaskRecord) bool {
	if len(q.States) > 0 && !slices.Contains(q.States, rec.GetState()) {
		return false
	}
	if q.Queue != "" && store.QueueOf(rec) != q.Queue {
		return false
	}
	for k, v := range q.Labels {
		if got, ok := rec.GetLabels()[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// List returns a page of tenant's tasks, newest first, and the token of the next page
// ("" at the end). Tokens are opaque and sealed: one altered, minted for another
// tenant, or replayed with different filters is INVALID_ARGUMENT (PAGE_TOKEN_INVALID).
// A page may hold fewer tasks than asked (even none) when the filters are selective,
// and stops before its encoded tasks would pass Config.MaxListResponseBytes (one task
// always fits); only an empty token means the end. The basic view never decodes the
// tasks' specs.
func (m *Manager) List(ctx context.Context, tenant string, q ListQuery) ([]*agentplanev1.Task, string, error) {
	size, err := pageSize(q.PageSize)
	if err != nil {
		return nil, "", err
	}
	if !q.CreatedAfter.IsZero() && !q.CreatedBefore.IsZero() && !q.CreatedAfter.Before(q.CreatedBefore) {
		return nil, "", apierr.InvalidArgument(apierr.ReasonInvalidArgument, "created_after must be before created_before")
	}
	if q.Queue != "" {
		if err := CheckQueue("queue", q.Queue); err != nil {
			return nil, "", err
		}
	}
	scope := q.scope(tenant)
	cursor, err := m.tokens.Open(scope, q.PageToken)
	if err != nil {
		return nil, "", err
	}
	var tasks []*agentplanev1.Task
	var next []byte
	more := false
	pageBytes := int64(0)
	err = m.store.View(ctx, func(r store.Reader) error {
		scanned := 0
		tr := store.TaskRange{After: cursor, CreatedAfter: q.CreatedAfter, CreatedBefore: q.CreatedBefore,
			States: q.States, Labels: q.Labels, Queue: q.Queue}
		return r.ScanTasks(tenant, tr,
			func(c []byte, rec *storagev1.TaskRecord) (bool, error) {
				scanned++
				if rec != nil && q.matches(rec) { // nil: the store stepped over a task the filters exclude
					if len(tasks) == size {
						more = true // the token resumes after what this page examined
						return false, nil
					}
					spec, err := readSpec(r, tenant, rec.GetTaskId(), q.View)
					if err != nil {
						return false, err
					}
					t := toAPITask(rec, spec, q.View)
					n := int64(listEntrySize(t))
					if len(tasks) > 0 && pageBytes+n > m.cfg.MaxListResponseBytes {
						more = true // the next page starts with this task
						return false, nil
					}
					tasks, pageBytes = append(tasks, t), pageBytes+n
				}
				next = c
				if scanned >= maxScanPerPage && len(tasks) < size {
					return false, errScanBudget
				}
				return true, nil
			})
	})
	switch {
	case errors.Is(err, errScanBudget):
		more = true
	case err != nil:
		return nil, "", err
	}
	if !more {
		return tasks, "", nil
	}
	return tasks, m.tokens.Seal(scope, next), nil
}

// listEntrySize is what t adds to an encoded ListTasksResponse: the field's tag, the
// length prefix and the task.
func listEntrySize(t *agentplanev1.Task) int {
	return protowire.SizeTag(1) + protowire.SizeBytes(proto.Size(t))
}

// errScanBudget stops a scan that examined maxScanPerPage tasks; never returned.
var errScanBudget = errors.New("scan budget spent")

// seqToken is the cursor of the per-task listings: a big-endian number.
func seqCursor(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

func (m *Manager) openSeqToken(scope []byte, token string) (int64, error) {
	c, err := m.tokens.Open(scope, token)
	if err != nil || c == nil {
		return 0, err
	}
	if len(c) != 8 {
		return 0, apierr.InvalidArgument(apierr.ReasonPageTokenInvalid, "page_token is not valid for this request")
	}
	return int64(binary.BigEndian.Uint64(c)), nil
}

// ListVerdicts returns a page of a task's verdicts in the order they were recorded.
func (m *Manager) ListVerdicts(ctx context.Context, tenant, taskID string, size int, token string) ([]*agentplanev1.Verdict, string, error) {
	size, err := pageSize(size)
	if err != nil {
		return nil, "", err
	}
	scope := pagetoken.Scope("verdicts", tenant, taskID)
	after, err := m.openSeqToken(scope, token)
	if err != nil {
		return nil, "", err
	}
	var out []*agentplanev1.Verdict
	more := false
	err = m.store.View(ctx, func(r store.Reader) error {
		if _, err := r.GetTask(tenant, taskID); err != nil {
			return err
		}
		return r.ScanVerdicts(tenant, taskID, after, func(v *storagev1.VerdictRecord) (bool, error) {
			if len(out) == size {
				more = true
				return false, nil
			}
			out = append(out, v.GetVerdict())
			return true, nil
		})
	})
	if err != nil || !more {
		return out, "", err
	}
	return out, m.tokens.Seal(scope, seqCursor(out[len(out)-1].GetSequence())), nil
}

// ListObligations returns a page of a task's obligations ledger in the order they were
// raised, optionally only those in the given states.
func (m *Manager) ListObligations(ctx context.Context, tenant, taskID string, states []agentplanev1.ObligationState, size int, token string) ([]*agentplanev1.Obligation, string, error) {
	size, err := pageSize(size)
	if err != nil {
		return nil, "", err
	}
	parts := []string{"obligations", tenant, taskID}
	sorted := slices.Clone(states)
	slices.Sort(sorted)
	for _, s := range slices.Compact(sorted) {
		parts = append(parts, strconv.Itoa(int(s)))
	}
	scope := pagetoken.Scope(parts...)
	after, err := m.openSeqToken(scope, token)
	if err != nil {
		return nil, "", err
	}
	var out []*agentplanev1.Obligation
	var last int64
	more := false
	err = m.store.View(ctx, func(r store.Reader) error {
		if _, err := r.GetTask(tenant, taskID); err != nil {
			return err
		}
		return r.ScanObligations(tenant, taskID, after, func(o *storagev1.ObligationRecord) (bool, error) {
			if len(states) > 0 && !slices.Contains(states, o.GetObligation().GetState()) {
				return true, nil
			}
			if len(out) == size {
				more = true
				return false, nil
			}
			out = append(out, o.GetObligation())
			last = o.GetOrdinal()
			return true, nil
		})
	})
	if err != nil || !more {
		return out, "", err
	}
	return out, m.tokens.Seal(scope, seqCursor(last)), nil
}

// ListEvents returns a page of tenant's task's log in sequence order, after afterSeq
// (ignored when token is set), at most size events (0: 50, capped at 500) and stopping
// before the page's encoded events would pass Config.MaxListResponseBytes (one event
// at least). The token is empty when the page reached the log's end as it was read.
// Another tenant's task is NOT_FOUND.
func (m *Manager) ListEvents(ctx context.Context, tenant, taskID string, afterSeq int64, size int, token string) ([]*agentplanev1.TaskEvent, string, error) {
	size, err := pageSize(size)
	if err != nil {
		return nil, "", err
	}
	if afterSeq < 0 {
		return nil, "", apierr.InvalidArgument(apierr.ReasonInvalidArgument, "after_sequence may not be negative")
	}
	scope := pagetoken.Scope("events", tenant, taskID)
	if token != "" {
		if afterSeq, err = m.openSeqToken(scope, token); err != nil {
			return nil, "", err
		}
	}
	var out []*agentplanev1.TaskEvent
	more := false
	err = m.store.View(ctx, func(r store.Reader) error {
		out, more = out[:0], false
		if _, err := r.GetTask(tenant, taskID); err != nil {
			return err
		}
		pageBytes := 0
		return r.ScanEvents(tenant, taskID, afterSeq, func(rec *storagev1.EventRecord) (bool, error) {
			ev := toAPIEvent(taskID, rec)
			n := protowire.SizeTag(1) + protowire.SizeBytes(proto.Size(ev))
			if len(out) == size || (len(out) > 0 && int64(pageBytes+n) > m.cfg.MaxListResponseBytes) {
				more = true
				return false, nil
			}
			out = append(out, ev)
			pageBytes += n
			return true, nil
		})
	})
	if err != nil || !more {
		return out, "", err
	}
	return out, m.tokens.Seal(scope, seqCursor(out[len(out)-1].GetSequence())), nil
}

// GetIn reads a task's basic view through r, inside a caller's transaction.
func (m *Manager) GetIn(r store.Reader, tenant, taskID string) (*agentplanev1.Task, error) {
	rec, err := r.GetTask(tenant, taskID)
	if err != nil {
		return nil, err
	}
	spec, err := readSpec(r, tenant, taskID, ViewBasic)
	if err != nil {
		return nil, err
	}
	return toAPITask(rec, spec, ViewBasic), nil
}

package webhooks

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/budget"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/tasks"
)

// WrapWriter returns w with the notifications of its changes written through it: a
// PutInterrupt that raises a tool approval, resolves it or lets it expire, and a
// PutTask that ends a task, enqueue one outbox record per subscribed endpoint of the
// tenant in the same transaction; a PutTask that changes the state of a task with A2A
// push configs enqueues one per config. Without webhooks configured and A2A push
// notifications off it returns w itself.
func (s *Service) WrapWriter(w store.Writer) store.Writer {
	if len(s.byTenant) == 0 && s.a2aPush == nil {
		return w
	}
	return &writer{Writer: w, s: s}
}

type writer struct {
	store.Writer
	s *Service
}

func isPending(rec *storagev1.InterruptRecord) bool {
	return rec != nil && rec.GetInterrupt().GetState() == agentplanev1.InterruptState_INTERRUPT_STATE_PENDING &&
		rec.GetClosedReason() == ""
}

// interruptEvent is what the change from old (nil: new) to rec is, or "".
func interruptEvent(old, rec *storagev1.InterruptRecord) string {
	switch {
	case !isPending(old) && isPending(rec):
		return config.EventInterruptCreated
	case isPending(old) && rec.GetInterrupt().GetState() == agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED:
		if rec.GetInterrupt().GetDecision().GetSource() == agentplanev1.DecisionSource_DECISION_SOURCE_DEADLINE {
			return config.EventInterruptExpired
		}
		return config.EventInterruptResolved
	}
	return ""
}

func (w *writer) PutInterrupt(rec *storagev1.InterruptRecord) error {
	in := rec.GetInterrupt()
	// What a person approves: a gated tool call, or a model call a spent budget holds.
	approval := in.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL || in.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_MODEL_CALL_APPROVAL
	if !approval || !w.s.wantsInterrupts(in.GetTenant()) {
		return w.Writer.PutInterrupt(rec)
	}
	old, err := w.GetInterrupt(in.GetTenant(), in.GetInterruptId())
	if err != nil && !store.IsNotFound(err) {
		return err
	}
	if err := w.Writer.PutInterrupt(rec); err != nil {
		return err
	}
	evs := requirementEvents(old, rec)
	if ev := interruptEvent(old, rec); ev != "" {
		evs = append(evs, ev)
	}
	if len(evs) == 0 {
		return nil
	}
	data := interruptData(w.s.view(rec), w.s.cfg.ConsoleURL)
	for _, ev := range evs {
		if err := w.s.enqueue(w.Writer, ev, data); err != nil {
			return err
		}
	}
	return nil
}

// requirementEvents are the events of an approval rule's progress from old to rec,
// both pending: a vote that did not resolve it, its reminder, its escalation.
func requirementEvents(old, rec *storagev1.InterruptRecord) []string {
	if !isPending(old) || !isPending(rec) {
		return nil
	}
	o, n := old.GetInterrupt().GetRequirement(), rec.GetInterrupt().GetRequirement()
	var evs []string
	if len(n.GetApprovals())+len(n.GetRejections()) != len(o.GetApprovals())+len(o.GetRejections()) ||
		n.GetReviewArgsDigest() != o.GetReviewArgsDigest() {
		evs = append(evs, config.EventInterruptVote)
	}
	if n.GetReminded() && !o.GetReminded() {
		evs = append(evs, config.EventInterruptReminder)
	}
	if n.GetEscalated() && !o.GetEscalated() {
		evs = append(evs, config.EventInterruptEscalated)
	}
	return evs
}

func (w *writer) PutTask(rec *storagev1.TaskRecord) error {
	ended := tasks.IsTerminal(rec.GetState()) && w.s.wants(rec.GetTenant(), config.EventTaskEnded)
	push := len(rec.GetA2APushConfigs()) > 0 && w.s.a2aPush != nil
	if !ended && !push {
		return w.Writer.PutTask(rec)
	}
	old, err := w.GetTask(rec.GetTenant(), rec.GetTaskId())
	if err != nil && !store.IsNotFound(err) {
		return err
	}
	if err := w.Writer.PutTask(rec); err != nil {
		return err
	}
	if push && (old == nil || old.GetState() != rec.GetState()) {
		if err := w.s.enqueueA2A(w.Writer, rec); err != nil {
			return err
		}
	}
	if !ended || (old != nil && tasks.IsTerminal(old.GetState())) {
		return nil
	}
	return w.s.enqueue(w.Writer, config.EventTaskEnded, taskData(rec, w.s.cfg.ConsoleURL))
}

// BudgetWarned enqueues a budget.warning notification for each endpoint of the
// budget's tenant subscribed to it, through w: tasks.Options.BudgetWarned, called in
// the transaction that took the budget to its threshold, so the notification is
// written once per budget and period, with the count.
func (s *Service) BudgetWarned(w store.Writer, taskID string, st *agentplanev1.BudgetStatus) error {
	if !s.wants(st.GetTenant(), config.EventBudgetWarning) {
		return nil
	}
	b := &Budget{
		Name: st.GetBudget(), AgentID: st.GetAgentId(), Period: st.GetPeriod(),
		PeriodStart: st.GetPeriodStart().AsTime().UTC(), ResetsAt: st.GetResetsAt().AsTime().UTC(),
		UsedTokens: st.GetUsedTokens(), LimitTokens: st.GetLimitTokens(), WarnPercent: st.GetWarnPercent(),
	}
	if st.GetLimitCostMicros() > 0 {
		b.UsedUSD, b.LimitUSD = budget.USD(st.GetUsedCostMicros()), budget.USD(st.GetLimitCostMicros())
	}
	return s.enqueue(w, config.EventBudgetWarning, Data{Tenant: st.GetTenant(), TaskID: taskID, Budget: b})
}

// newID is a notification id: msg_, the time in hex (so ids sort by creation time),
// and random bits. Every id has the same length.
func newID(now time.Time) string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("msg_%016x%s", now.UnixNano(), hex.EncodeToString(r[:]))
}

// enqueue writes one outbox record per endpoint of the tenant subscribed to ev
// (through enqueueTo).
func (s *Service) enqueue(w store.Writer, ev string, data Data) error {
	now := s.now()
	body, err := json.Marshal(Message{Type: ev, Timestamp: now.UTC(), Data: data})
	if err != nil {
		return fmt.Errorf("webhooks: encoding %s: %w", ev, err)
	}
	for _, ep := range s.byTenant[data.Tenant] {
		if !ep.events[ev] {
			continue
		}
		err := s.enqueueTo(w, now, &storagev1.OutboxRecord{Tenant: data.Tenant, Endpoint: ep.Name, EventType: ev}, func() ([][]byte, error) {
			if ep.email == nil {
				return [][]byte{body}, nil
			}
			// One message per recipient: each carries links that act as its reader.
			var payloads [][]byte
			for _, p := range ep.email.To {
				b, err := json.Marshal(emailPayload{To: p, Message: json.RawMessage(body)})
				if err != nil {
					return nil, fmt.Errorf("webhooks: encoding %s: %w", ev, err)
				}
				payloads = append(payloads, b)
			}
			return payloads, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// enqueueTo writes one pending outbox record per payload to one destination (to's
// tenant, endpoint, event type and A2A push config), unless the tenant's outbox is
// full: then the payloads are not built, and the notification is dropped, counted
// and logged once the transaction commits.
func (s *Service) enqueueTo(w store.Writer, now time.Time, to *storagev1.OutboxRecord, payloads func() ([][]byte, error)) error {
	depth, err := w.OutboxDepth(to.GetTenant())
	if err != nil {
		return err
	}
	if depth >= s.cfg.MaxOutboxPerTenant {
		w.OnCommit(func() { s.dropped(to.GetTenant(), to.GetEndpoint(), to.GetEventType(), depth) })
		return nil
	}
	bodies, err := payloads()
	if err != nil {
		return err
	}
	for _, payload := range bodies {
		if err := w.PutOutbox(&storagev1.OutboxRecord{
			Id: newID(now), Tenant: to.GetTenant(), Endpoint: to.GetEndpoint(), EventType: to.GetEventType(), Payload: payload,
			CreateTime: timestamppb.New(now), State: storagev1.OutboxState_OUTBOX_STATE_PENDING,
			NextAttemptTime: timestamppb.New(now), A2APush: to.GetA2APush(),
		}); err != nil {
			return err
		}
	}
	w.OnCommit(s.wakeSender)
	return nil
}

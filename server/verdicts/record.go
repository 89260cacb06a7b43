package verdicts

import (
	"context"
	"fmt"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/spec"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/tasks"
)

// Recorder records verdicts and keeps the ledger, over the task domain. Listing is the
// task domain's (tasks.Manager.ListVerdicts, ListObligations).
type Recorder struct {
	tasks *tasks.Manager
}

// NewRecorder returns a Recorder over m.
func NewRecorder(m *tasks.Manager) *Recorder { return &Recorder{tasks: m} }

// Record answers RuntimeService.RecordVerdict under the caller's lease: it checks the
// verdict (Check), checks that the node is an evaluator of the task's graph
// (CheckNode), applies it to the task's ledger (Apply) and stores, in one transaction,
// the verdict (keyed by the sequence of its VerdictRecorded event), the ledger entries
// it resolved and raised, and the event. It returns the response the runtime gets:
// the verdict as recorded, with dropped ids, and the open obligations afterwards. A
// stale lease is LEASE_LOST. A verdict naming the tool call that carried it (call_id)
// must name a call of the verdict tool that the gate let run (checkCall).
// A retry of a call made with a request_id returns the verdict that call recorded and
// the ledger's open obligations now.
func (r *Recorder) Record(ctx context.Context, req *agentplanev1.RecordVerdictRequest) (*agentplanev1.RecordVerdictResponse, error) {
	in := RequestFrom(req)
	if err := Check(in); err != nil {
		return nil, err
	}
	once, err := tasks.NewRequest(req)
	if err != nil {
		return nil, err
	}
	var resp *agentplanev1.RecordVerdictResponse
	err = r.tasks.UpdateLeasedOnce(ctx, req.GetLease(), once, func(op *tasks.Op) error {
		resp = nil
		spec, err := op.Spec()
		if err != nil {
			return err
		}
		if err := CheckNode(spec.GetResolvedSpec(), in.Node); err != nil {
			return err
		}
		if err := checkCall(op, in.CallID); err != nil {
			return err
		}
		task := op.Task()
		tenant, taskID := task.GetTenant(), task.GetTaskId()
		var open []*agentplanev1.Obligation
		ordinals := map[string]int64{}
		err = op.Writer().ScanObligations(tenant, taskID, 0, func(o *storagev1.ObligationRecord) (bool, error) {
			if o.GetObligation().GetState() == agentplanev1.ObligationState_OBLIGATION_STATE_OPEN {
				open = append(open, o.GetObligation())
				ordinals[o.GetObligation().GetObligationId()] = o.GetOrdinal()
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		out := Apply(taskID, task.GetVerdictCount()+1, in, open, task.GetObligationCount(), op.Now())
		// The verdict is keyed by the sequence of the event that records it: the next one.
		out.Verdict.Sequence = task.GetLastSequence() + 1
		seq, err := op.AppendContent(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_VerdictRecorded{
			VerdictRecorded: VerdictRecordedEvent(out.Verdict),
		}})
		if err != nil {
			return err
		}
		if seq != out.Verdict.GetSequence() {
			return fmt.Errorf("verdicts: verdict event got sequence %d, expected %d", seq, out.Verdict.GetSequence())
		}
		if err := op.Writer().PutVerdict(tenant, &storagev1.VerdictRecord{Verdict: out.Verdict}); err != nil {
			return err
		}
		for _, o := range out.Resolved {
			if err := op.Writer().PutObligation(tenant, taskID, &storagev1.ObligationRecord{Ordinal: ordinals[o.GetObligationId()], Obligation: o}); err != nil {
				return err
			}
		}
		for i, o := range out.Raised {
			// Apply numbers raised obligations on from the count it was given.
			n := task.GetObligationCount() + int64(i) + 1
			if err := op.Writer().PutObligation(tenant, taskID, &storagev1.ObligationRecord{Ordinal: n, Obligation: o}); err != nil {
				return err
			}
		}
		task.VerdictCount++
		task.ObligationCount = out.Count
		op.SetResult("", seq)
		resp = &agentplanev1.RecordVerdictResponse{Verdict: out.Verdict, OpenObligations: out.Open}
		return nil
	}, func(op *tasks.Op, a *storagev1.AppliedRequest) error {
		resp = &agentplanev1.RecordVerdictResponse{}
		tenant, taskID := op.Task().GetTenant(), op.Task().GetTaskId()
		err := op.Writer().ScanVerdicts(tenant, taskID, a.GetResultSequence()-1, func(v *storagev1.VerdictRecord) (bool, error) {
			resp.Verdict = v.GetVerdict()
			return false, nil
		})
		if err != nil {
			return err
		}
		return op.Writer().ScanObligations(tenant, taskID, 0, func(o *storagev1.ObligationRecord) (bool, error) {
			if o.GetObligation().GetState() == agentplanev1.ObligationState_OBLIGATION_STATE_OPEN {
				resp.OpenObligations = append(resp.OpenObligations, o.GetObligation())
			}
			return true, nil
		})
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// checkCall refuses a verdict call id that is not a call of the verdict tool checked
// with the gate and let run (allowed, approved or edited).
func checkCall(op *tasks.Op, callID string) error {
	if callID == "" {
		return nil
	}
	task := op.Task()
	rec, err := op.Writer().GetInterrupt(task.GetTenant(), hitl.InterruptID(task.GetTaskId(), callID))
	switch {
	case store.IsNotFound(err):
		return hitl.NotApproved(callID, "call %q of task %s was never checked; check the verdict call with RuntimeService.CheckToolCall before recording it", callID, task.GetTaskId())
	case err != nil:
		return err
	}
	in := rec.GetInterrupt()
	switch {
	case in.GetKind() != agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL || in.GetApproval().GetToolName() != spec.VerdictToolName:
		return hitl.NotApproved(callID, "call %q is not a call of the %s tool", callID, spec.VerdictToolName)
	case in.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED || hitl.Rejected(in.GetDecision()):
		return hitl.NotApproved(callID, "call %q of the %s tool was not let run", callID, spec.VerdictToolName)
	}
	return nil
}

package tasks

import (
	storagev1 "github.com/agentplane/agentplane/gen/agentplane/storage/v1"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/store"
)

// toAPITask is the API view of a task. It shares sub-messages with the records, which
// are fresh copies owned by the caller.
func toAPITask(rec *storagev1.TaskRecord, spec *storagev1.TaskSpecRecord) *agentplanev1.Task {
	t := &agentplanev1.Task{
		TaskId:              rec.GetTaskId(),
		Tenant:              rec.GetTenant(),
		State:               rec.GetState(),
		RequestId:           rec.GetRequestId(),
		Input:               spec.GetInput(),
		Labels:              rec.GetLabels(),
		CreateTime:          rec.GetCreateTime(),
		UpdateTime:          rec.GetUpdateTime(),
		EndTime:             rec.GetEndTime(),
		LastSequence:        rec.GetLastSequence(),
		Attempt:             rec.GetAttempt(),
		Failure:             rec.GetFailure(),
		Output:              rec.GetOutput(),
		InterruptPolicy:     spec.GetInterruptPolicy(),
		PendingInterruptIds: rec.GetPendingInterruptIds(),
		McpServers:          spec.GetMcpServers(),
		A2APeers:            spec.GetA2APeers(),
		CancelRequested:     rec.GetCancellation().GetRuntimeHeld(),
		CreatedBy:           rec.GetCreatedBy(),
		SessionId:           rec.GetSessionId(),
		ToolAxes:            spec.GetToolAxes(),
		InterruptTimeout:    spec.GetInterruptTimeout(),
		Queue:               store.QueueOf(rec),
	}
	if l := rec.GetLease(); l != nil && !l.GetRevoked() {
		t.RuntimeId = l.GetRuntimeId()
	}
	switch s := spec.GetSpec().(type) {
	case *storagev1.TaskSpecRecord_Agent:
		t.Spec = &agentplanev1.Task_Agent{Agent: s.Agent}
	case *storagev1.TaskSpecRecord_Graph:
		t.Spec = &agentplanev1.Task_Graph{Graph: s.Graph}
	case *storagev1.TaskSpecRecord_AgentId:
		t.Spec = &agentplanev1.Task_AgentId{AgentId: s.AgentId}
	}
	return t
}

// toAPIEvent is the API view of a stored event. The payload is shared, not copied:
// events are immutable once committed.
func toAPIEvent(taskID string, ev *storagev1.EventRecord) *agentplanev1.TaskEvent {
	return &agentplanev1.TaskEvent{
		TaskId:   taskID,
		Sequence: ev.GetSequence(),
		Time:     ev.GetTime(),
		Payload:  ev.GetEvent().GetPayload(),
	}
}

package tasks

import (
	"net/url"
	"slices"
	"strings"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// View is how much of a task a read returns: BASIC leaves the submitted inline spec
// out, FULL carries it. UNSPECIFIED is taken as FULL here; the service layer resolves
// it to each RPC's default first.
type View = agentplanev1.TaskView

// Views.
const (
	ViewBasic = agentplanev1.TaskView_TASK_VIEW_BASIC
	ViewFull  = agentplanev1.TaskView_TASK_VIEW_FULL
)

// toAPITask is the API view of a task. It shares sub-messages with the records, which
// are fresh copies owned by the caller. It never carries MCP or A2A header values (an
// operator's credentials): a runtime gets those in its lease (leaseProto). In the basic
// view spec may lack its submitted spec (readSpec); it is not read.
func toAPITask(rec *storagev1.TaskRecord, spec *storagev1.TaskSpecRecord, view View) *agentplanev1.Task {
	t := &agentplanev1.Task{
		TaskId:              rec.GetTaskId(),
		Tenant:              rec.GetTenant(),
		State:               rec.GetState(),
		RequestId:           rec.GetRequestId(),
		Input:               spec.GetInput(),
		Usage:               rec.GetUsage(),
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
		EffectiveMcpServers: mcpInfos(spec.GetMcpServers()),
		EffectiveA2APeers:   a2aInfos(spec.GetA2APeers()),
		CancelRequested:     rec.GetCancellation().GetRuntimeHeld(),
		CreatedBy:           rec.GetCreatedBy(),
		SessionId:           rec.GetSessionId(),
		ToolAxes:            spec.GetToolAxes(),
		InterruptTimeout:    spec.GetInterruptTimeout(),
		SpecKind:            rec.GetSpecKind(),
		Queue:               store.QueueOf(rec),
		Priority:            rec.GetPriority(),
		Concurrency:         rec.GetConcurrency(),
		ConcurrencyKey:      rec.GetPolicyConcurrencyKey(),
		TraceContext:        rec.GetTraceContext(),
		ScheduledBy:         rec.GetScheduledBy(),
	}
	if l := rec.GetLease(); l != nil && !l.GetRevoked() {
		t.RuntimeId = l.GetRuntimeId()
	}
	switch s := spec.GetSpec().(type) {
	case *storagev1.TaskSpecRecord_Agent:
		if view != ViewBasic {
			t.Spec = &agentplanev1.Task_Agent{Agent: s.Agent}
		}
	case *storagev1.TaskSpecRecord_Graph:
		if view != ViewBasic {
			t.Spec = &agentplanev1.Task_Graph{Graph: s.Graph}
		}
	case *storagev1.TaskSpecRecord_AgentId:
		t.Spec = &agentplanev1.Task_AgentId{AgentId: s.AgentId}
	}
	return t
}

func mcpInfos(servers []*agentplanev1.McpServer) []*agentplanev1.McpServerInfo {
	out := make([]*agentplanev1.McpServerInfo, 0, len(servers))
	for _, s := range servers {
		out = append(out, &agentplanev1.McpServerInfo{Name: s.GetName(), Url: shownURL(s.GetUrl()), HeaderNames: headerNames(s.GetHeaders())})
	}
	return out
}

func a2aInfos(peers []*agentplanev1.A2APeer) []*agentplanev1.A2APeerInfo {
	out := make([]*agentplanev1.A2APeerInfo, 0, len(peers))
	for _, p := range peers {
		out = append(out, &agentplanev1.A2APeerInfo{Name: p.GetName(), Url: shownURL(p.GetUrl()), HeaderNames: headerNames(p.GetHeaders())})
	}
	return out
}

func headerNames(h map[string]string) []string {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// shownURL is a peer URL as a client may see it: without its query string or fragment,
// which may carry a token, and without user info (which the gates refuse anyway).
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// Never reached for a stored entry (the gates parsed it); show nothing that
		// could be a token.
		raw, _, _ = strings.Cut(raw, "?")
		raw, _, _ = strings.Cut(raw, "#")
		return raw
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
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

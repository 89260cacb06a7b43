package gates

import (
	"fmt"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Protocol names written as EntriesDropped.protocol.
const (
	ProtocolMcp = "mcp"
	ProtocolA2a = "a2a"
)

// Resolved is one lane's outcome for a StartTask request.
type Resolved[E Entry] struct {
	// Effective is the deployment baseline followed by the honoured caller entries:
	// store it on the task (Task.mcp_servers / a2a_peers) and hand it to the lease.
	Effective []E
	// Ignored is non-nil when the caller sent entries and the gate is closed (not
	// locked): write it as the task's mcp_injection_ignored / a2a_injection_ignored
	// event and log it. Names lists the entries as labelled in reports.
	Ignored *agentplanev1.InjectionIgnored
	// Dropped is non-nil when caller entries were dropped (shape, count, or shadowing
	// the baseline): write it as an entries_dropped event.
	Dropped *agentplanev1.EntriesDropped
}

// ResolveMcp computes the effective MCP servers of a task from d and the request's
// list (nil: absent). A present list in a deployment that locks mcp is refused with a
// *LockedKeyError, even when empty; an absent list never is.
func ResolveMcp(d Deployment, list *agentplanev1.McpServerList) (Resolved[*agentplanev1.McpServer], error) {
	return resolve(d, mcpLane, ProtocolMcp, list != nil, list.GetServers(), d.McpBaseline)
}

// ResolveA2a is ResolveMcp for A2A peers and the a2a key.
func ResolveA2a(d Deployment, list *agentplanev1.A2APeerList) (Resolved[*agentplanev1.A2APeer], error) {
	return resolve(d, a2aLane, ProtocolA2a, list != nil, list.GetPeers(), d.A2aBaseline)
}

func resolve[E Entry](d Deployment, l lane, protocol string, present bool, entries, baseline []E) (Resolved[E], error) {
	honoured, locked, why := l.gate(d)
	switch {
	case locked && present:
		return Resolved[E]{}, &LockedKeyError{Keys: []LockedKey{l.key}, Fields: []string{l.field}}
	case !honoured && len(entries) > 0:
		return Resolved[E]{
			Effective: cloneSlice(baseline),
			Ignored:   &agentplanev1.InjectionIgnored{Names: labels(entries), Reason: string(why)},
		}, nil
	case !honoured:
		return Resolved[E]{Effective: cloneSlice(baseline)}, nil
	}
	kept, dropped := ValidateEntries(d.Mode, entries)
	effective, shadowed := Merge(baseline, kept)
	r := Resolved[E]{Effective: effective}
	if dropped = append(dropped, shadowed...); len(dropped) > 0 {
		r.Dropped = &agentplanev1.EntriesDropped{Protocol: protocol, Entries: dropped}
	}
	return r, nil
}

// labels names the entries of an ignored list, bounded like drop reports: the first
// MaxCallerPeers by label, the rest as one "#i..#j".
func labels[E Entry](entries []E) []string {
	var out []string
	for i, e := range entries {
		if i == MaxCallerPeers && i < len(entries)-1 {
			return append(out, fmt.Sprintf("#%d..#%d", i, len(entries)-1))
		}
		out = append(out, label(e, i))
	}
	return out
}

func cloneSlice[E any](s []E) []E {
	if len(s) == 0 {
		return nil
	}
	return append(make([]E, 0, len(s)), s...)
}

// StartTask is the gates' whole answer for a StartTask request.
type StartTask struct {
	// Mcp and A2a are the two injection lanes.
	Mcp Resolved[*agentplanev1.McpServer]
	A2a Resolved[*agentplanev1.A2APeer]
	// Events are the gate events to append to the new task's log, in order (ignored
	// lanes, then drops), each a TaskEvent payload ready to set.
	Events []*agentplanev1.TaskEvent
}

// ResolveStartTask is the single entry point StartTask calls, once, before creating
// the task: it refuses a request occupying locked keys (*LockedKeyError, every key
// named), refuses malformed tool_axes (*AxisError), and otherwise resolves both lanes.
// Nothing it returns depends on anything but d and req.
func ResolveStartTask(d Deployment, req *agentplanev1.StartTaskRequest) (*StartTask, error) {
	if err := AssertUnlocked(d, req); err != nil {
		return nil, err
	}
	if err := ValidateToolAxes(req.GetToolAxes()); err != nil {
		return nil, err
	}
	mcp, err := ResolveMcp(d, req.GetMcpServers())
	if err != nil {
		return nil, err
	}
	a2a, err := ResolveA2a(d, req.GetA2APeers())
	if err != nil {
		return nil, err
	}
	st := &StartTask{Mcp: mcp, A2a: a2a}
	if mcp.Ignored != nil {
		st.Events = append(st.Events, &agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_McpInjectionIgnored{McpInjectionIgnored: mcp.Ignored}})
	}
	if a2a.Ignored != nil {
		st.Events = append(st.Events, &agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_A2AInjectionIgnored{A2AInjectionIgnored: a2a.Ignored}})
	}
	for _, d := range []*agentplanev1.EntriesDropped{mcp.Dropped, a2a.Dropped} {
		if d != nil {
			st.Events = append(st.Events, &agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_EntriesDropped{EntriesDropped: d}})
		}
	}
	return st, nil
}

package gates

import (
	"fmt"
	"strings"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// LockedKeyError refuses a request that occupies locked keys. The service layer maps
// it to FAILED_PRECONDITION with reason CONFIG_LOCKED_KEY (apierr.ReasonLockedKey),
// the same reason whichever key it is: a client branches on "an operator locked part
// of what I sent", and Keys says which part.
type LockedKeyError struct {
	// Keys are the occupied locked keys, in canonical order.
	Keys []LockedKey
	// Fields are the request fields that occupy them, in the same order.
	Fields []string
}

func (e *LockedKeyError) Error() string {
	parts := make([]string, len(e.Keys))
	for i, k := range e.Keys {
		parts[i] = fmt.Sprintf("config key %q is locked by this deployment and the request sets %s", k, e.Fields[i])
	}
	return strings.Join(parts, "; ") + " (an empty list also sets it; leave the field out)"
}

// occupant is how a request occupies a key.
type occupant struct {
	key      LockedKey
	field    string
	occupies func(*agentplanev1.StartTaskRequest) bool
}

// occupants is the single table of which StartTask fields occupy which key. Presence,
// not content, decides: an empty list occupies its key, an absent one does not.
var occupants = []occupant{
	{mcpLane.key, mcpLane.field, func(r *agentplanev1.StartTaskRequest) bool { return r.GetMcpServers() != nil }},
	{a2aLane.key, a2aLane.field, func(r *agentplanev1.StartTaskRequest) bool { return r.GetA2APeers() != nil }},
	{KeyToolPolicy, "interrupt_policy", func(r *agentplanev1.StartTaskRequest) bool { return r.GetInterruptPolicy() != nil }},
	{KeyToolPolicy, "tool_axes", func(r *agentplanev1.StartTaskRequest) bool { return len(r.GetToolAxes()) > 0 }},
}

// AssertUnlocked refuses req with a *LockedKeyError when it occupies any key locked
// in d, naming every such key. It does not look at the mode: in a multi-tenant
// deployment caller entries would be ignored anyway, but the operator said "this
// deployment takes no such field", and that is said to the caller rather than hidden.
func AssertUnlocked(d Deployment, req *agentplanev1.StartTaskRequest) error {
	var e LockedKeyError
	for _, o := range occupants {
		if d.IsLocked(o.key) && o.occupies(req) {
			e.Keys = append(e.Keys, o.key)
			e.Fields = append(e.Fields, o.field)
		}
	}
	if len(e.Keys) == 0 {
		return nil
	}
	return &e
}

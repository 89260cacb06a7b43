package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agent"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/spec"
)

// verdictArgs are the verdict tool's arguments (spec.VerdictToolSchema).
type verdictArgs struct {
	Verdict    string   `json:"verdict"`
	Confidence *float64 `json:"confidence"`
	Rationale  *string  `json:"rationale"`
	Resolved   []struct {
		ID     string  `json:"id"`
		How    string  `json:"how"`
		Reason *string `json:"reason"`
	} `json:"resolved"`
	Raised []string `json:"raised"`
}

// verdictState holds the verdict an evaluator's session recorded in this lease.
type verdictState struct {
	got *agentplanev1.Verdict
}

// verdict is the verdict the evaluator's session recorded in this lease, or else the
// last one recorded in the invocation's log (by an earlier lease); nil when the
// evaluator answered without one.
func (v *verdictState) verdict(in *invocation) *agentplanev1.Verdict {
	if v.got != nil {
		return v.got
	}
	var last *agentplanev1.Verdict
	for _, ev := range in.events {
		if r := ev.GetVerdictRecorded(); r != nil {
			last = r.GetVerdict()
		}
	}
	return last
}

// verdictTool runs the verdict tool the control plane granted evaluator in.node: the
// call (already gated) is recorded with RecordVerdict, once. A call an earlier lease
// recorded is read back from the log, never recorded again.
func (x *run) verdictTool(in *invocation, st *verdictState) agent.Tool {
	def := spec.VerdictTool().GetFunction()
	for _, t := range in.g.GetAgents()[in.node].GetSpec().GetAgent().GetTools() {
		if t.GetFunction().GetName() == spec.VerdictToolName {
			def = t.GetFunction() // as granted
		}
	}
	return agent.Tool{Def: def, EndsTurn: true, Run: func(ctx context.Context, c worker.Call, argsJSON string, resumed bool) (string, bool, error) {
		if resumed {
			for _, ev := range in.events {
				if v := ev.GetVerdictRecorded().GetVerdict(); v != nil && v.GetCallId() == c.ID {
					st.got = v
					return x.verdictResult(v), false, nil
				}
			}
		}
		var a verdictArgs
		if err := json.Unmarshal([]byte(argsJSON), &a); err != nil {
			return fmt.Sprintf("the verdict's arguments are not valid JSON: %v", err), true, nil
		}
		res := &agentplanev1.VerdictResult{Verdict: a.Verdict, Confidence: a.Confidence, Rationale: a.Rationale}
		if vs := spec.CheckVerdict(res, ""); len(vs) > 0 {
			return "the verdict was not recorded: " + violations(vs) + ". Call verdict again.", true, nil
		}
		req := &agentplanev1.RecordVerdictRequest{Node: in.node, Result: res, Raised: a.Raised, EndsTurn: true, CallId: c.ID, RequestId: "verdict-" + c.ID}
		for _, r := range a.Resolved {
			how := agentplanev1.ResolutionHow_RESOLUTION_HOW_ADDRESSED
			if r.How == "withdrawn" {
				how = agentplanev1.ResolutionHow_RESOLUTION_HOW_WITHDRAWN
			}
			req.Resolved = append(req.Resolved, &agentplanev1.ObligationResolution{ObligationId: r.ID, How: how, Reason: r.Reason})
		}
		resp, err := x.t.RecordVerdict(ctx, req)
		if err != nil {
			return "", false, err
		}
		st.got = resp.GetVerdict()
		x.open = map[string]*agentplanev1.Obligation{}
		x.order = nil
		for _, o := range resp.GetOpenObligations() {
			x.open[o.GetObligationId()] = o
			x.order = append(x.order, o.GetObligationId())
		}
		return x.verdictResult(st.got), false, nil
	}}
}

// verdictResult is the verdict tool's result and the evaluate edge's answer: the
// recorded verdict, what was dropped, and the ledger's open obligations.
func (x *run) verdictResult(v *agentplanev1.Verdict) string {
	out := map[string]any{
		"verdict_id": v.GetVerdictId(),
		"verdict":    v.GetResult().GetVerdict(),
	}
	if v.GetResult().Rationale != nil {
		out["rationale"] = v.GetResult().GetRationale()
	}
	if len(v.GetDroppedObligationIds()) > 0 {
		out["dropped_obligation_ids"] = v.GetDroppedObligationIds()
	}
	var open []map[string]string
	for _, id := range x.order {
		open = append(open, map[string]string{"id": id, "text": x.open[id].GetText()})
	}
	out["open_obligations"] = open
	b, _ := json.Marshal(out)
	return string(b)
}

// ledger rebuilds the open obligations from the verdicts recorded in the log.
func (x *run) ledger(evs []*agentplanev1.TaskEvent) {
	for _, ev := range evs {
		v := ev.GetVerdictRecorded().GetVerdict()
		if v == nil {
			continue
		}
		for _, r := range v.GetResolved() {
			delete(x.open, r.GetObligationId())
		}
		for _, o := range v.GetRaised() {
			x.open[o.GetObligationId()] = o
			x.order = append(x.order, o.GetObligationId())
		}
	}
	kept := x.order[:0]
	for _, id := range x.order {
		if x.open[id] != nil {
			kept = append(kept, id)
		}
	}
	x.order = kept
}

// openObligations lists the open obligations for an evaluator's input.
func (x *run) openObligations() string {
	var b strings.Builder
	for _, id := range x.order {
		fmt.Fprintf(&b, "- %s: %s\n", id, x.open[id].GetText())
	}
	return b.String()
}

// evaluated turns an evaluator's session result into the evaluate edge's answer.
func (x *run) evaluated(in *invocation, st *verdictState, res agent.Result) (agent.Result, error) {
	v := st.verdict(in)
	if v == nil {
		return res, &worker.Failure{Reason: ReasonNoVerdict, Message: fmt.Sprintf("evaluator %s answered without calling the verdict tool", in.node)}
	}
	m := client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, x.verdictResult(v))
	m.Node = in.node
	return agent.Result{Message: m}, nil
}

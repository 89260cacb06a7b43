package hitl

import (
	"encoding/json"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

// ModelCallTool is the tool_name of the ApprovalRequest of a model-call approval
// (INTERRUPT_KIND_MODEL_CALL_APPROVAL), so that a reviewer's tool that knows only tool
// approvals shows what is asked. It is no tool a spec can declare (names with two
// leading underscores are reserved, like __auto_pause__).
const ModelCallTool = "__model_call__"

// ModelCallInterruptID is the id of the interrupt of model call callID of task
// taskID: derived, like InterruptID, so that a runtime asking again (a lost answer, a
// later lease replaying its turn) finds it, and distinct from the ids of the task's
// tool calls.
func ModelCallInterruptID(taskID, callID string) string {
	return "mc-" + InterruptID(taskID, callID)[len("in-"):]
}

// ModelCall is a model call a runtime asks about (RuntimeService.CheckModelCall).
type ModelCall struct {
	CallID, AgentName, Model string
	TripIndex                int32
}

// NewModelCallInterrupt builds the pending interrupt of model call c, held for a
// person's approval by the spent budget hold. Its ApprovalRequest names ModelCallTool
// and carries the budget twice: typed (model_call) and as the JSON text of
// arguments_json, whose digest the decision binds.
func NewModelCallInterrupt(m InterruptMeta, c ModelCall, hold *agentplanev1.ModelCallApproval) *agentplanev1.Interrupt {
	mc := &agentplanev1.ModelCallApproval{
		Budget: hold.GetBudget(), Period: hold.GetPeriod(), Unit: hold.GetUnit(), Used: hold.GetUsed(), Limit: hold.GetLimit(),
		ResetsAt: hold.GetResetsAt(), AgentId: hold.GetAgentId(), Model: c.Model,
	}
	text := modelCallJSON(mc)
	in := newInterrupt(m, agentplanev1.InterruptKind_INTERRUPT_KIND_MODEL_CALL_APPROVAL, c.AgentName, ArgsDigest(text))
	in.CallId = c.CallID
	req := &agentplanev1.ApprovalRequest{
		InterruptId:   m.InterruptID,
		ToolName:      ModelCallTool,
		ArgumentsJson: text,
		Context:       m.approvalContext(c.AgentName, c.TripIndex, nil),
		RequestTime:   timestamppb.New(m.Now),
		ModelCall:     mc,
	}
	desc := "a model call of a task whose budget " + mc.GetBudget() + " is spent: approve to let this one call run, reject to end the task"
	req.ToolDescription = &desc
	in.Request = &agentplanev1.Interrupt_Approval{Approval: req}
	return in
}

// modelCallJSON is the reviewer's view of mc as JSON text, its keys in a fixed order.
func modelCallJSON(mc *agentplanev1.ModelCallApproval) string {
	b, _ := json.Marshal(struct {
		Budget   string `json:"budget"`
		Period   string `json:"period"`
		Unit     string `json:"unit"`
		Used     string `json:"used"`
		Limit    string `json:"limit"`
		ResetsAt string `json:"resets_at"`
		AgentID  string `json:"agent_id,omitempty"`
		Model    string `json:"model,omitempty"`
	}{mc.GetBudget(), mc.GetPeriod(), mc.GetUnit(), mc.GetUsed(), mc.GetLimit(),
		mc.GetResetsAt().AsTime().UTC().Format(time.RFC3339), mc.GetAgentId(), mc.GetModel()})
	return string(b)
}

// IsModelCall reports whether in holds a model call for a spent budget.
func IsModelCall(in *agentplanev1.Interrupt) bool {
	return in.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_MODEL_CALL_APPROVAL
}

// noModelCallEdit refuses an edit of a model-call approval: there are no arguments to
// change, only the call to let run or not.
func noModelCallEdit(in *agentplanev1.Interrupt) error {
	return apierr.InvalidArgument(apierr.ReasonEditInvalid,
		"interrupt %s holds a model call for the spent budget %q: there are no arguments to edit; approve it (this one model call runs) or reject it (the task ends)",
		in.GetInterruptId(), in.GetApproval().GetModelCall().GetBudget())
}

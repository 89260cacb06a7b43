package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/ctl/internal/printer"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

func addHitlCommands(cmd *cobra.Command, g *globals) {
	cmd.AddCommand(
		newHitlListCommand(g),
		newHitlShowCommand(g),
		newHitlApproveCommand(g),
		newHitlRejectCommand(g),
		newHitlEditCommand(g),
		newHitlAuditCommand(g),
		newHitlRevokeLinkCommand(g),
	)
}

func newHitlRevokeLinkCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke-link LINK_ID",
		Short: "Revoke a signed approval link (both of its approve and reject links) by the id on its page and in the webhook",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Hitl.RevokeApprovalLink(ctx, &agentplanev1.RevokeApprovalLinkRequest{LinkId: args[0]})
				if err != nil {
					return err
				}
				return g.printer(cmd).Message(resp, func(t *printer.Tab) {
					t.Row("LINK", resp.GetLinkId())
					state := "revoked"
					if resp.GetExpired() {
						state = "expired already"
					}
					t.Row("state", state)
					t.Row("expires", resp.GetExpireTime().AsTime().UTC().Format(time.RFC3339))
				})
			})
		},
	}
}

type hitlListOptions struct {
	task, tool, tag string
	minAge          time.Duration
	all, turnEnds   bool
	toolOutputs     bool
	limit           int32
	pageToken       string
}

func newHitlListCommand(g *globals) *cobra.Command {
	o := &hitlListOptions{}
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List pending approvals (the inbox), oldest first",
		Example: "  ctl hitl list\n  ctl hitl list --tag money --min-age 10m\n  ctl hitl list --task t_123 --all",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.minAge < 0 || o.limit < 0 {
				return usageErr("--min-age and --limit must not be negative")
			}
			req := &agentplanev1.ListInterruptsRequest{
				PageSize: o.limit, PageToken: o.pageToken, TaskId: o.task, ToolName: o.tool, Tag: o.tag,
			}
			if o.turnEnds || o.toolOutputs {
				req.Kinds = []agentplanev1.InterruptKind{agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL, agentplanev1.InterruptKind_INTERRUPT_KIND_MODEL_CALL_APPROVAL}
			}
			if o.turnEnds {
				req.Kinds = append(req.Kinds, agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE)
			}
			if o.toolOutputs {
				req.Kinds = append(req.Kinds, agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED)
			}
			if o.all {
				req.States = []agentplanev1.InterruptState{
					agentplanev1.InterruptState_INTERRUPT_STATE_PENDING, agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED,
				}
			}
			if o.minAge > 0 {
				req.MinAge = durationpb.New(o.minAge)
			}
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Hitl.ListInterrupts(ctx, req)
				if err != nil {
					return err
				}
				now := time.Now()
				err = g.printer(cmd).Message(resp, func(t *printer.Tab) {
					head := []any{"INTERRUPT", "TASK", "TOOL", "TAGS", "AGE", "ARGS"}
					if o.all {
						head = append(head, "STATE")
					}
					t.Row(head...)
					for _, it := range resp.GetInterrupts() {
						r := it.GetApproval()
						args := r.GetArgumentsJson()
						if to := it.GetToolOutput(); to != nil {
							args = to.GetArgumentsJson()
						}
						row := []any{it.GetInterruptId(), it.GetTaskId(), interruptTool(it), orNone(r.GetContext().GetTags()),
							age(requestTime(it), now), truncate(argsText(args), 48)}
						if o.all {
							row = append(row, interruptState(it))
						}
						t.Row(row...)
					}
				})
				if err == nil && g.output == string(printer.Table) {
					nextPageHint(cmd, resp.GetNextPageToken())
				}
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.task, "task", "", "only this task's interrupts")
	f.StringVar(&o.tool, "tool", "", "only interrupts for this tool")
	f.StringVar(&o.tag, "tag", "", "only interrupts carrying this tag")
	f.DurationVar(&o.minAge, "min-age", 0, "only interrupts waiting at least this long")
	f.BoolVar(&o.all, "all", false, "include resolved interrupts (needs --task)")
	f.BoolVar(&o.turnEnds, "turn-ends", false, "include chat-mode turn ends (resolved by ctl task continue)")
	f.BoolVar(&o.toolOutputs, "tool-outputs", false, "include waits for client tool outputs (given by ctl task continue --tool-output)")
	f.Int32Var(&o.limit, "limit", 0, "interrupts per page (server default 50, at most 500)")
	f.StringVar(&o.pageToken, "page-token", "", "continue a listing from the token a previous page printed")
	return cmd
}

// interruptTool names what an interrupt waits on.
func interruptTool(it *agentplanev1.Interrupt) string {
	if it.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE {
		return "(turn end)"
	}
	if it.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED {
		return it.GetToolOutput().GetToolName() + " (client output)"
	}
	return it.GetApproval().GetToolName()
}

// requestTime is when an interrupt was raised, whatever its kind.
func requestTime(it *agentplanev1.Interrupt) *timestamppb.Timestamp {
	if te := it.GetTurnEnd(); te != nil {
		return te.GetRequestTime()
	}
	if to := it.GetToolOutput(); to != nil {
		return to.GetRequestTime()
	}
	return it.GetApproval().GetRequestTime()
}

func interruptState(it *agentplanev1.Interrupt) string {
	if it.GetState() == agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED {
		return map[agentplanev1.DecisionType]string{
			agentplanev1.DecisionType_DECISION_TYPE_APPROVE: "approved",
			agentplanev1.DecisionType_DECISION_TYPE_REJECT:  "rejected",
			agentplanev1.DecisionType_DECISION_TYPE_EDIT:    "edited",
		}[it.GetDecision().GetType()]
	}
	return enumName(it.GetState(), "INTERRUPT_STATE_")
}

func newHitlShowCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show INTERRUPT_ID",
		Short: "Show one approval request: the call, its context, and the digest of its args",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Hitl.GetInterrupt(ctx, &agentplanev1.GetInterruptRequest{InterruptId: args[0]})
				if err != nil {
					return err
				}
				it := resp.GetInterrupt()
				if err := g.printer(cmd).Message(resp, func(t *printer.Tab) { interruptTable(t, it, time.Now()) }); err != nil {
					return err
				}
				if g.output == string(printer.Table) {
					// Args go last, indented, since a table cell cannot hold them.
					fmt.Fprintf(cmd.OutOrStdout(), "args:\n%s\n", printer.Block(indent(argsIndented(it.GetApproval().GetArgumentsJson()), "  ")))
					printRunArgs(cmd, it)
				}
				return nil
			})
		},
	}
}

func interruptTable(t *printer.Tab, it *agentplanev1.Interrupt, now time.Time) {
	r := it.GetApproval()
	rc := r.GetContext()
	t.Row("INTERRUPT", it.GetInterruptId())
	t.Row("task", it.GetTaskId())
	t.Row("state", interruptState(it))
	t.Row("tool", interruptTool(it))
	if r.ToolDescription != nil {
		t.Row("description", r.GetToolDescription())
	}
	t.Row("agent", fmt.Sprintf("%s (trip %d)", orDash(rc.GetAgentName()), rc.GetTripIndex()))
	t.Row("call id", orDash(it.GetCallId()))
	if rc.SessionId != nil {
		t.Row("session", rc.GetSessionId())
	}
	if rc.OriginalInput != nil {
		t.Row("original input", truncate(rc.GetOriginalInput(), 120))
	}
	t.Row("tags", orNone(rc.GetTags()))
	t.Row("requested", when(requestTime(it))+" ("+age(requestTime(it), now)+" ago)")
	if it.GetDeadline() != nil {
		t.Row("deadline", when(it.GetDeadline()))
	}
	t.Row("args digest", orDash(it.GetArgsDigest()))
	requirementRows(t, it.GetRequirement())
	if d := it.GetDecision(); d != nil {
		via := enumName(d.GetSource(), "DECISION_SOURCE_")
		if d.GetChannel() != "" {
			via += ", via " + d.GetChannel()
		}
		t.Row("decision", fmt.Sprintf("%s by %s at %s (%s)", enumName(d.GetType(), "DECISION_TYPE_"), orDash(d.GetDecidedBy()),
			when(d.GetDecideTime()), via))
		if d.Reason != nil {
			t.Row("reason", d.GetReason())
		}
	}
}

// requirementRows show an approval rule's state: the rule, who approved so far, who
// is still needed, and when it escalates.
func requirementRows(t *printer.Tab, rq *agentplanev1.ApprovalRequirement) {
	if rq == nil {
		return
	}
	group := "any approver"
	if rq.GetGroup() != "" {
		group = "group " + rq.GetGroup()
	}
	rule := fmt.Sprintf("%s: %d of %s", rq.GetRule(), rq.GetQuorum(), group)
	if rq.GetRejectQuorum() > 1 {
		rule += fmt.Sprintf(", %d rejections reject", rq.GetRejectQuorum())
	}
	if rq.GetSeparationOfDuties() {
		rule += fmt.Sprintf(", not the starter (%s)", orDash(rq.GetStartedBy()))
	}
	t.Row("approval rule", rule)
	votes := func(as []*agentplanev1.Approval) string {
		var out []string
		for _, a := range as {
			out = append(out, fmt.Sprintf("%s via %s at %s", a.GetPrincipal(), a.GetChannel(), when(a.GetTime())))
		}
		return orNone(out)
	}
	t.Row("approved by", votes(rq.GetApprovals()))
	if len(rq.GetRejections()) > 0 {
		t.Row("rejected by", votes(rq.GetRejections()))
	}
	needed := fmt.Sprintf("%d more", rq.GetApprovalsNeeded())
	if len(rq.GetEligible()) > 0 {
		needed += " from " + strings.Join(rq.GetEligible(), ", ")
	}
	t.Row("still needed", needed)
	if rq.EditedArgumentsJson != nil {
		t.Row("under review", "edited args, digest "+rq.GetReviewArgsDigest())
	}
	if rq.GetRemindTime() != nil {
		t.Row("reminder", when(rq.GetRemindTime())+map[bool]string{true: " (sent)"}[rq.GetReminded()])
	}
	if rq.GetEscalateTime() != nil {
		t.Row("escalates", fmt.Sprintf("%s to group %s%s", when(rq.GetEscalateTime()), rq.GetEscalationGroup(),
			map[bool]string{true: " (escalated)"}[rq.GetEscalated()]))
	}
}

// printRunArgs says, after a resolved approval's table, what the call runs with: the
// reviewer's arguments after an edit, the model's after an approval, nothing after a
// rejection. The args of an edit are the text the runtime is handed, indented.
func printRunArgs(cmd *cobra.Command, it *agentplanev1.Interrupt) {
	d := it.GetDecision()
	if d == nil || it.GetApproval() == nil {
		return
	}
	out := cmd.OutOrStdout()
	switch d.GetType() {
	case agentplanev1.DecisionType_DECISION_TYPE_EDIT:
		fmt.Fprintf(out, "runs with (edited):\n%s\n", printer.Block(indent(argsIndented(d.GetArgumentsJson()), "  ")))
	case agentplanev1.DecisionType_DECISION_TYPE_APPROVE:
		fmt.Fprintf(out, "runs with (as the model wrote them):\n%s\n", printer.Block(indent(argsIndented(d.GetArgumentsJson()), "  ")))
	case agentplanev1.DecisionType_DECISION_TYPE_REJECT:
		fmt.Fprintln(out, "does not run: rejected")
	}
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// resolveOptions are the flags every resolution shares.
type resolveOptions struct {
	reason string
	digest string
}

func (o *resolveOptions) bind(cmd *cobra.Command, reasonHelp string) {
	cmd.Flags().StringVar(&o.reason, "reason", "", reasonHelp)
	cmd.Flags().StringVar(&o.digest, "digest", "", "the args digest you reviewed (from hitl show); the server refuses the decision if the args differ")
}

// newResolveCommand builds approve, reject and edit: each turns its flags into a
// decision and prints the resolved interrupt.
func newResolveCommand(g *globals, use, short string, o *resolveOptions, decide func() (*agentplanev1.ResolveInterruptRequest, error)) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := decide()
			if err != nil {
				return err
			}
			req.InterruptId = args[0]
			req.ArgsDigest = o.digest
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Hitl.ResolveInterrupt(ctx, req)
				if err != nil {
					return err
				}
				if err := g.printer(cmd).Message(resp, func(t *printer.Tab) { interruptTable(t, resp.GetInterrupt(), time.Now()) }); err != nil {
					return err
				}
				if g.output == string(printer.Table) {
					printRunArgs(cmd, resp.GetInterrupt())
				}
				return nil
			})
		},
	}
}

// optional is nil for "" (an absent optional field), else &s.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func newHitlApproveCommand(g *globals) *cobra.Command {
	o := &resolveOptions{}
	cmd := newResolveCommand(g, "approve INTERRUPT_ID", "Approve a gated call: it runs with its arguments unchanged", o, func() (*agentplanev1.ResolveInterruptRequest, error) {
		return &agentplanev1.ResolveInterruptRequest{Decision: &agentplanev1.ResolveInterruptRequest_Approve{
			Approve: &agentplanev1.ApproveDecision{Reason: optional(o.reason)},
		}}, nil
	})
	o.bind(cmd, "optional note for the audit log")
	return cmd
}

func newHitlRejectCommand(g *globals) *cobra.Command {
	o := &resolveOptions{}
	cmd := newResolveCommand(g, "reject INTERRUPT_ID --reason TEXT", "Reject a gated call: it does not run, and the model sees the reason", o, func() (*agentplanev1.ResolveInterruptRequest, error) {
		if strings.TrimSpace(o.reason) == "" {
			return nil, usageErr("reject needs --reason: the model is shown it so it can correct itself")
		}
		return &agentplanev1.ResolveInterruptRequest{Decision: &agentplanev1.ResolveInterruptRequest_Reject{
			Reject: &agentplanev1.RejectDecision{Reason: o.reason},
		}}, nil
	})
	o.bind(cmd, "why (required; shown to the model)")
	return cmd
}

func newHitlEditCommand(g *globals) *cobra.Command {
	o := &resolveOptions{}
	var argsFlag string
	cmd := newResolveCommand(g, "edit INTERRUPT_ID --args JSON|@FILE", "Run a gated call with new arguments (checked against the tool's parameter schema)", o, func() (*agentplanev1.ResolveInterruptRequest, error) {
		args, err := parseArgsFlag(argsFlag)
		if err != nil {
			return nil, err
		}
		return &agentplanev1.ResolveInterruptRequest{Decision: &agentplanev1.ResolveInterruptRequest_Edit{
			Edit: &agentplanev1.EditDecision{ArgumentsJson: args, Reason: optional(o.reason)},
		}}, nil
	})
	cmd.Flags().StringVar(&argsFlag, "args", "", "the new arguments as JSON, or @FILE to read them from a file (required)")
	_ = cmd.MarkFlagRequired("args")
	o.bind(cmd, "optional note for the audit log")
	return cmd
}

// parseArgsFlag reads --args: inline JSON or @FILE. The text is sent as written (the
// decision binds its digest); only its validity is checked here.
func parseArgsFlag(s string) (string, error) {
	b := []byte(s)
	source := "--args"
	if name, ok := strings.CutPrefix(s, "@"); ok {
		var err error
		if b, err = os.ReadFile(name); err != nil {
			return "", usageErr("--args: %v", err)
		}
		source = name
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "", usageErr("%s is not valid JSON: %v", source, err)
	}
	return strings.TrimSpace(string(b)), nil
}

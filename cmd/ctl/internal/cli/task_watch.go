package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/cmd/ctl/internal/printer"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

type taskWatchOptions struct {
	after      int64
	reconnects int
	backoff    worker.Backoff
}

func newTaskWatchCommand(g *globals) *cobra.Command {
	o := &taskWatchOptions{}
	cmd := &cobra.Command{
		Use:   "watch TASK_ID",
		Short: "Follow a task's events live until it ends",
		Long: "Print the task's events from --after on, one line each (sequence, time, kind, summary), then follow\n" +
			"them live. The command exits when the task ends. When the stream drops it reconnects after the\n" +
			"last sequence it printed, so nothing is missed or printed twice. -o json prints one JSON object\n" +
			"per line.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.after < 0 {
				return usageErr("--after must not be negative")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cmd.SetContext(ctx)
			p := g.printer(cmd)
			refused := refusedCalls{}
			emit := func(ev *agentplanev1.TaskEvent) error { return printEvent(p, ev, refused) }
			return g.stream(cmd, func(ctx context.Context, c *client.Client) error {
				if o.after > 0 {
					refused.seed(ctx, c.Hitl, args[0])
				}
				w := &watcher{tasks: c.Tasks, id: args[0], last: o.after, opts: o, warn: cmd.ErrOrStderr(), emit: emit}
				return w.run(ctx)
			})
		},
	}
	cmd.Flags().Int64Var(&o.after, "after", 0, "start after this sequence (0: from the first event)")
	cmd.Flags().IntVar(&o.reconnects, "reconnects", 10, "give up after this many reconnects in a row without a new event")
	return cmd
}

// watcher follows one task across reconnects.
type watcher struct {
	tasks agentplanev1.TaskServiceClient
	id    string
	last  int64 // sequence of the last event emitted
	opts  *taskWatchOptions
	warn  io.Writer
	emit  func(*agentplanev1.TaskEvent) error
}

func (w *watcher) run(ctx context.Context) error {
	failures := 0
	for {
		before := w.last
		ended, err := w.once(ctx)
		switch {
		case ended:
			return nil
		case ctx.Err() != nil:
			return nil // interrupted by the user
		case err != nil && !worker.IsTransient(err):
			return err
		case err == nil:
			// The stream ended without the task ending (a server restarting
			// gracefully, or --after past the end): ask whether it is over.
			resp, gerr := w.tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: w.id, View: agentplanev1.TaskView_TASK_VIEW_BASIC})
			if gerr == nil && client.Terminal(resp.GetTask().GetState()) {
				return nil
			}
			err = errors.New("the stream ended before the task did")
		}
		if w.last > before {
			failures = 0
		}
		failures++
		if failures > w.opts.reconnects {
			return fmt.Errorf("watch %s: giving up after %d reconnects: %w", w.id, w.opts.reconnects, err)
		}
		fmt.Fprintf(w.warn, "watch: %s; reconnecting after sequence %d\n", describe(err), w.last)
		t := time.NewTimer(w.opts.backoff.Delay(failures))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// once reads one stream until it ends; ended reports that the task reached a
// terminal state.
func (w *watcher) once(ctx context.Context) (ended bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := w.tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: w.id, AfterSequence: w.last})
	if err != nil {
		return false, err
	}
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		ev := resp.GetEvent()
		if ev == nil {
			continue // caught_up, keepalive, message deltas: nothing to print
		}
		if ev.GetSequence() <= w.last {
			continue // never print an event twice, whatever the server sends
		}
		if err := w.emit(ev); err != nil {
			return false, err
		}
		w.last = ev.GetSequence()
		if client.Terminal(ev.GetStateChanged().GetToState()) {
			return true, nil
		}
	}
}

// refusedCalls are the task's calls that were refused and by whom, by call id,
// learnt from the gate's and the reviewers' events before the call's report: a
// runtime reports a refused call, and the refusal it hands the model, as a tool call
// and an error result, which must not read as if the call ran.
type refusedCalls map[string]string

func (r refusedCalls) learn(ev *agentplanev1.TaskEvent) {
	switch p := ev.GetPayload().(type) {
	case *agentplanev1.TaskEvent_ToolGated:
		if g := p.ToolGated; g.GetOutcome() == agentplanev1.GateOutcome_GATE_OUTCOME_REJECT {
			r[g.GetCallId()] = "by the gate (" + g.GetReason() + ")"
		}
	case *agentplanev1.TaskEvent_InterruptResolved:
		r.decided(p.InterruptResolved.GetDecision())
	}
}

func (r refusedCalls) decided(d *agentplanev1.Decision) {
	if d.GetType() == agentplanev1.DecisionType_DECISION_TYPE_REJECT && d.GetCallId() != "" {
		s := "by " + decidedBy(d)
		if d.GetReason() != "" {
			s += ": " + truncate(oneLine(d.GetReason()), 80)
		}
		r[d.GetCallId()] = s
	}
}

// seed learns the rejections of a watch that starts after events it does not print
// (--after), from the task's resolved approvals. Without them (an error), the lines
// read as the events say.
func (r refusedCalls) seed(ctx context.Context, hitl agentplanev1.HitlServiceClient, task string) {
	req := &agentplanev1.ListInterruptsRequest{TaskId: task, PageSize: 500,
		States: []agentplanev1.InterruptState{agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED},
		Kinds:  []agentplanev1.InterruptKind{agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL}}
	for {
		resp, err := hitl.ListInterrupts(ctx, req)
		if err != nil {
			return
		}
		for _, it := range resp.GetInterrupts() {
			r.decided(it.GetDecision())
		}
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
			return
		}
	}
}

// decidedBy is who decided, and how when it was not a person.
func decidedBy(d *agentplanev1.Decision) string {
	s := orDash(d.GetDecidedBy())
	if d.GetSource() != agentplanev1.DecisionSource_DECISION_SOURCE_HUMAN && d.GetSource() != agentplanev1.DecisionSource_DECISION_SOURCE_UNSPECIFIED {
		s += " (" + enumName(d.GetSource(), "DECISION_SOURCE_") + ")"
	}
	return s
}

// printEvent prints one event: a line for people, a JSON line, or a YAML document.
// refused learns from every event, whatever the format.
func printEvent(p *printer.Printer, ev *agentplanev1.TaskEvent, refused refusedCalls) error {
	refused.learn(ev)
	switch p.Format {
	case printer.JSON:
		return p.Line(ev)
	case printer.YAML:
		if _, err := fmt.Fprintln(p.Out, "---"); err != nil {
			return err
		}
		return p.Message(ev, nil)
	}
	kind, summary := describeEvent(ev, refused)
	ts := "--:--:--.---"
	if ev.GetTime() != nil {
		ts = ev.GetTime().AsTime().Local().Format("15:04:05.000")
	}
	_, err := fmt.Fprintf(p.Out, "%5d  %s  %-18s %s\n", ev.GetSequence(), ts, kind, printer.Text(summary))
	return err
}

// describeEvent names an event's kind and summarizes it on one line.
func describeEvent(ev *agentplanev1.TaskEvent, refused refusedCalls) (kind, summary string) {
	switch p := ev.GetPayload().(type) {
	case *agentplanev1.TaskEvent_Submitted:
		return "submitted", fmt.Sprintf("%s by %s: %q", p.Submitted.GetKind(), orDash(p.Submitted.GetCreatedBy()), truncate(oneLine(messageSummary(p.Submitted.GetInput())), 80))
	case *agentplanev1.TaskEvent_StateChanged:
		s := stateName(p.StateChanged.GetFromState()) + " -> " + stateName(p.StateChanged.GetToState())
		if r := p.StateChanged.GetReason(); r != "" {
			s += " (" + r + ")"
		}
		return "state", s
	case *agentplanev1.TaskEvent_Message:
		m := p.Message
		who := enumName(m.GetRole(), "MESSAGE_ROLE_")
		if m.GetNode() != "" {
			who += " " + m.GetNode()
		}
		if m.GetModel() != "" {
			who += " (" + m.GetModel() + ")"
		}
		return "message", who + ": " + truncate(oneLine(messageSummary(m)), 100) + usageText(m.GetUsage())
	case *agentplanev1.TaskEvent_ToolCall:
		c := p.ToolCall
		if why, ok := refused[c.GetCallId()]; ok {
			return "refused", fmt.Sprintf("%s [%s] did not run: rejected %s; args %s", c.GetToolName(), c.GetCallId(), why, truncate(argsText(c.GetArgumentsJson()), 60))
		}
		return "tool call", fmt.Sprintf("%s [%s] %s", c.GetToolName(), c.GetCallId(), truncate(argsText(c.GetArgumentsJson()), 80))
	case *agentplanev1.TaskEvent_ToolResult:
		r := p.ToolResult
		if _, ok := refused[r.GetCallId()]; ok {
			return "refusal", fmt.Sprintf("%s [%s]: the model is told %s", r.GetToolName(), r.GetCallId(), truncate(compactJSON(r.GetResult()), 80))
		}
		s := fmt.Sprintf("%s [%s] -> %s", r.GetToolName(), r.GetCallId(), truncate(compactJSON(r.GetResult()), 80))
		if r.GetIsError() {
			s += " (error)"
		}
		return "tool result", s
	case *agentplanev1.TaskEvent_Note:
		return "note", truncate(oneLine(p.Note.GetText()), 100) + attrsText(p.Note.GetAttributes())
	case *agentplanev1.TaskEvent_Lease:
		l := p.Lease
		return "lease", fmt.Sprintf("%s %s (attempt %d, epoch %d)", enumName(l.GetKind(), "LEASE_CHANGE_KIND_"), l.GetRuntimeId(), l.GetAttempt(), l.GetEpoch())
	case *agentplanev1.TaskEvent_ToolGated:
		gt := p.ToolGated
		s := fmt.Sprintf("%s [%s]: %s", gt.GetToolName(), gt.GetCallId(), enumName(gt.GetOutcome(), "GATE_OUTCOME_"))
		if gt.GetInterruptId() != "" {
			s += " " + gt.GetInterruptId()
		}
		if len(gt.GetTags()) > 0 {
			s += " tags " + strings.Join(gt.GetTags(), ",")
		}
		if gt.GetReason() != "" {
			s += " (" + gt.GetReason() + ")"
		}
		return "gate", s
	case *agentplanev1.TaskEvent_InterruptRaised:
		it := p.InterruptRaised.GetInterrupt()
		if it.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE {
			return "interrupt", it.GetInterruptId() + ": turn ended, waiting for the user (ctl task continue)"
		}
		if it.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED {
			return "interrupt", fmt.Sprintf("%s: %s [%s] %s waits for the client's output (ctl task continue --tool-output %s=JSON)",
				it.GetInterruptId(), it.GetToolOutput().GetToolName(), it.GetCallId(), truncate(argsText(it.GetToolOutput().GetArgumentsJson()), 60), it.GetCallId())
		}
		return "interrupt", fmt.Sprintf("%s: %s waits for approval (ctl hitl show %s)", it.GetInterruptId(), it.GetApproval().GetToolName(), it.GetInterruptId())
	case *agentplanev1.TaskEvent_InterruptResolved:
		d := p.InterruptResolved.GetDecision()
		s := fmt.Sprintf("%s: %s by %s", p.InterruptResolved.GetInterruptId(), enumName(d.GetType(), "DECISION_TYPE_"), decidedBy(d))
		if d.GetReason() != "" {
			s += ": " + truncate(oneLine(d.GetReason()), 80)
		}
		if d.GetType() == agentplanev1.DecisionType_DECISION_TYPE_EDIT {
			s += "; runs with " + truncate(argsText(d.GetArgumentsJson()), 80)
		}
		return "decision", s
	case *agentplanev1.TaskEvent_VerdictRecorded:
		v := p.VerdictRecorded.GetVerdict()
		s := fmt.Sprintf("%s by %s", v.GetResult().GetVerdict(), v.GetNode())
		if v.GetResult().Confidence != nil {
			s += fmt.Sprintf(" (confidence %.2f)", v.GetResult().GetConfidence())
		}
		s += fmt.Sprintf("; raised %d, resolved %d", len(v.GetRaised()), len(v.GetResolved()))
		if len(v.GetDroppedObligationIds()) > 0 {
			s += "; dropped " + strings.Join(v.GetDroppedObligationIds(), ",")
		}
		return "verdict", s
	case *agentplanev1.TaskEvent_McpInjectionIgnored:
		return "mcp ignored", strings.Join(p.McpInjectionIgnored.GetNames(), ",") + " (" + p.McpInjectionIgnored.GetReason() + ")"
	case *agentplanev1.TaskEvent_A2AInjectionIgnored:
		return "a2a ignored", strings.Join(p.A2AInjectionIgnored.GetNames(), ",") + " (" + p.A2AInjectionIgnored.GetReason() + ")"
	case *agentplanev1.TaskEvent_EntriesDropped:
		var names []string
		for _, e := range p.EntriesDropped.GetEntries() {
			names = append(names, e.GetName()+": "+e.GetReason())
		}
		return "dropped", p.EntriesDropped.GetProtocol() + " " + strings.Join(names, "; ")
	case *agentplanev1.TaskEvent_CancelRequested:
		return "cancel", fmt.Sprintf("by %s: %s", orDash(p.CancelRequested.GetRequestedBy()), orDash(p.CancelRequested.GetReason()))
	case *agentplanev1.TaskEvent_Output:
		return "output", truncate(oneLine(messageSummary(p.Output.GetMessage())), 100)
	case *agentplanev1.TaskEvent_BudgetWarning:
		b := p.BudgetWarning.GetBudget()
		return "budget", fmt.Sprintf("%s at %d%%: %s (ctl budget)", oneLine(b.GetBudget()), b.GetWarnPercent(), budgetLine(b))
	}
	return "unknown", "(an event this ctl does not know; use -o json)"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func attrsText(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	return " {" + strings.Join(sortedPairs(m), " ") + "}"
}

package script

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// checkpointAttr is the note attribute that records where a task resumes: the index
// of the step to play first on the next lease. scriptAttr, beside it, is the ID of the
// script that wrote it.
const (
	checkpointAttr = "script.resume_at"
	scriptAttr     = "script.id"
)

// ReasonForeignCheckpoint is the failure reason of a task whose checkpoint was written
// by another script (or one the runner cannot place): the runner does not guess where
// to resume.
const ReasonForeignCheckpoint = "script.foreign_checkpoint"

// Runner plays a Script for every task it is handed; it is a worker.Handler.
type Runner struct {
	// Script is what to play. The runner calls only RuntimeService, under the lease:
	// a resumed task's checkpoint and the open obligations a verdict resolves by text
	// are read from the task's history (worker.Task.History).
	Script *Script
	// Progress, when set, receives one line per step played.
	Progress io.Writer
	// Durable makes gated tool calls without a wait key wait durably.
	Durable bool

	mu sync.Mutex // serializes Progress writes across tasks
}

var _ worker.Handler = (*Runner)(nil)

// Run plays the script for one lease: from the first step, or from the checkpoint of
// a resumed task, until a step ends the task or gives the lease up.
func (r *Runner) Run(ctx context.Context, t *worker.Task) error {
	start, ran, err := r.resumePoint(ctx, t)
	if err != nil {
		r.logf(t, "refusing the task: %v", err)
		return err
	}
	p := &play{r: r, t: t, node: r.node(t), ran: ran, vars: strings.NewReplacer(
		"{{input}}", t.InputText(),
		"{{continue}}", continueText(t.ContinueMessages()),
	)}
	r.logf(t, "leased (attempt %d); playing %s from step %d of %d", t.Attempt(), r.Script.Name, start+1, len(r.Script.Steps))
	for i := start; i < len(r.Script.Steps); i++ {
		ended, err := p.step(ctx, i)
		if err != nil {
			return fmt.Errorf("%s step %d (line %d): %w", r.Script.Name, i+1, r.Script.Steps[i].Line, err)
		}
		if ended {
			return nil
		}
	}
	return nil // unreachable for a parsed script: its last step ends the task
}

// node is the agent name used on events: the script's, else the leased agent's.
func (r *Runner) node(t *worker.Task) string {
	if r.Script.Node != "" {
		return r.Script.Node
	}
	if n := t.Spec().GetAgent().GetName(); n != "" {
		return n
	}
	return "agent"
}

func (r *Runner) logf(t *worker.Task, format string, args ...any) {
	if r.Progress == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.Progress, "%s: %s\n", t.ID(), fmt.Sprintf(format, args...))
}

// resumePoint finds where a resumed task continues: the last checkpoint note in the
// history the lease covers (events up to Lease.history_cursor), read under the lease.
// A first lease starts at step 0. A checkpoint another script wrote, or one naming a
// step this script lacks, fails the task (ReasonForeignCheckpoint) instead of
// resuming somewhere else. Steps between the checkpoint and where a
// crashed runtime stopped are played again, except tool calls already in the history:
// a decision is spent by the report of its call, so the server refuses a second report
// (TOOL_CALL_NOT_APPROVED), and the tool must not run twice anyway. ran holds those
// calls, by call id, with whether their result was recorded too.
func (r *Runner) resumePoint(ctx context.Context, t *worker.Task) (at int, ran map[string]bool, err error) {
	l := t.Lease()
	resumed := l.GetAttempt() > 1 || len(l.GetResolvedInterrupts()) > 0 || len(l.GetPendingInterrupts()) > 0 || len(l.GetContinueMessages()) > 0
	if !resumed || l.GetHistoryCursor() <= 0 {
		return 0, nil, nil
	}
	ran = map[string]bool{}
	var foreign error
	err = t.History(ctx, 0, l.GetHistoryCursor(), func(ev *agentplanev1.TaskEvent) bool {
		attrs := ev.GetNote().GetAttributes()
		if v, ok := attrs[checkpointAttr]; ok {
			n, err := strconv.Atoi(v)
			switch id := attrs[scriptAttr]; {
			case id != r.Script.ID:
				if id == "" {
					id = "a script that did not sign it"
				}
				foreign = fmt.Errorf("the checkpoint at event %d was written by %s, and this runtime plays %s; "+
					"a task resumes only on a runtime playing the script that started it (route it with a queue: ctl task start --queue, ctl runtime run --queue)",
					ev.GetSequence(), id, r.Script.ID)
				return false
			case err != nil || n < 0 || n >= len(r.Script.Steps):
				foreign = fmt.Errorf("the checkpoint at event %d names step %q, which %s does not have", ev.GetSequence(), v, r.Script.ID)
				return false
			}
			at = n
		}
		if c := ev.GetToolCall(); c != nil {
			if _, seen := ran[c.GetCallId()]; !seen {
				ran[c.GetCallId()] = false
			}
		}
		if res := ev.GetToolResult(); res != nil {
			ran[res.GetCallId()] = true
		}
		return true
	})
	if err != nil {
		return 0, nil, fmt.Errorf("reading the task's history: %w", err)
	}
	if foreign != nil {
		return 0, nil, &worker.Failure{Reason: ReasonForeignCheckpoint, Message: foreign.Error()}
	}
	return at, ran, nil
}

// play is one lease's run of the script.
type play struct {
	r    *Runner
	t    *worker.Task
	node string
	vars *strings.Replacer // {{input}} and {{continue}}
	// ran is the tool calls already in the task's history (see resumePoint), by call
	// id: true when their result is recorded too.
	ran map[string]bool
}

// step plays step i; ended says the task ended or was handed back.
func (p *play) step(ctx context.Context, i int) (ended bool, err error) {
	st := &p.r.Script.Steps[i]
	t := p.t
	switch {
	case st.Say != nil:
		text := p.vars.Replace(*st.Say)
		p.r.logf(t, "say %q", text)
		_, err = t.Report(ctx, worker.MessageEvent(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, text, p.node))
		return false, err

	case st.Note != nil:
		return false, t.Note(ctx, p.vars.Replace(*st.Note), nil)

	case st.Sleep != nil:
		select {
		case <-ctx.Done():
			return false, context.Cause(ctx)
		case <-time.After(time.Duration(*st.Sleep)):
			return false, nil
		}

	case st.Tool != nil:
		return p.tool(ctx, i, st.Tool)

	case st.Pause != nil:
		// The next lease (after ContinueTask) resumes after this step.
		if err := p.checkpoint(ctx, i+1); err != nil {
			return false, err
		}
		text := p.vars.Replace(*st.Pause)
		if _, err := t.Pause(ctx, text, p.node); err != nil {
			return false, err
		}
		p.r.logf(t, "turn ended (%q); waiting for the user: ctl task continue %s --message ...", text, t.ID())
		return true, nil

	case st.Verdict != nil:
		return false, p.verdict(ctx, st.Verdict)

	case st.Complete != nil:
		out := &agentplanev1.TaskOutput{
			Message:    client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, p.vars.Replace(st.Complete.Text)),
			Structured: st.Complete.Structured,
		}
		if err := t.Complete(ctx, out); err != nil {
			return false, err
		}
		p.r.logf(t, "completed")
		return true, nil

	case st.Fail != nil:
		if err := t.Fail(ctx, st.Fail.Reason, p.vars.Replace(st.Fail.Message), st.Fail.Retry); err != nil {
			return false, err
		}
		p.r.logf(t, "failed (%s)", st.Fail.Reason)
		return true, nil
	}
	return false, errors.New("empty step") // Parse refuses these
}

// checkpoint records that the next lease of this task resumes at step i.
func (p *play) checkpoint(ctx context.Context, i int) error {
	return p.t.Note(ctx, fmt.Sprintf("script checkpoint: resume at step %d", i+1),
		map[string]string{checkpointAttr: strconv.Itoa(i), scriptAttr: p.r.Script.ID})
}

func (p *play) tool(ctx context.Context, i int, tool *Tool) (bool, error) {
	t := p.t
	call := worker.Call{
		ID:            tool.ID,
		Name:          tool.Name,
		Description:   tool.Description,
		ArgumentsJSON: tool.args,
		Node:          p.node,
		Trip:          tool.Trip,
		Annotations:   tool.annotations,
		Delivery:      worker.Interactive,
	}
	call.OnInterrupt = func(it *agentplanev1.Interrupt) {
		p.r.logf(t, "tool %s needs approval: interrupt %s (ctl hitl approve %s)", tool.Name, it.GetInterruptId(), it.GetInterruptId())
		if call.Delivery == worker.Interactive {
			// A runtime that stops during the wait suspends the task; the next lease
			// resumes at this step, which finds the decision by call id, instead of
			// playing the steps before it (their messages) again.
			if err := p.checkpoint(ctx, i); err != nil {
				p.r.logf(t, "could not record where to resume (%v); a resumed lease plays the steps before this one again", err)
			}
		}
	}
	if call.ID == "" {
		call.ID = fmt.Sprintf("step-%d", i+1)
	}
	if withResult, ok := p.ran[call.ID]; ok {
		// An earlier lease ran this call and reported it; do not run it again.
		p.r.logf(t, "tool %s already ran under an earlier lease; not running it again", tool.Name)
		if withResult {
			return false, nil
		}
		return false, t.ToolResult(ctx, call, tool.result, tool.Error)
	}
	if tool.Wait == "durable" || (tool.Wait == "" && p.r.Durable) {
		call.Delivery = worker.Durable
		// If the call suspends, the next lease replays this step, which then finds
		// its decision by call id.
		if err := p.checkpoint(ctx, i); err != nil {
			return false, err
		}
	}
	gate, err := t.ToolCall(ctx, call)
	if errors.Is(err, worker.ErrSuspended) {
		p.r.logf(t, "suspended until the decision on tool %s; the lease is released", tool.Name)
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if gate.Reported {
		// Reported by an earlier lease although the history read at the start of this
		// one did not show it: do not run it again.
		p.r.logf(t, "tool %s already ran under an earlier lease; not running it again", tool.Name)
		if gate.ResultReported {
			return false, nil
		}
		return false, t.ToolResult(ctx, call, tool.result, tool.Error)
	}
	if !gate.Allowed {
		// ToolCall reported the rejected call and its error result.
		p.r.logf(t, "tool %s rejected: %s", tool.Name, gate.Reason)
		if tool.OnReject == "fail" {
			if err := t.Fail(ctx, "tool.rejected", fmt.Sprintf("tool %s was rejected: %s", tool.Name, gate.Reason), false); err != nil {
				return false, err
			}
			return true, nil
		}
		return false, nil
	}
	how := "allowed"
	if gate.Interrupt != nil { // a person (or a deadline) decided
		how = strings.ToLower(strings.TrimPrefix(gate.Decision.GetType().String(), "DECISION_TYPE_")) + "d by " + orSystem(gate.Decision.GetDecidedBy())
	}
	p.r.logf(t, "tool %s %s; reporting its result", tool.Name, how)
	return false, t.ToolResult(ctx, call, tool.result, tool.Error)
}

func orSystem(s string) string {
	if s == "" {
		return "the gate"
	}
	return s
}

func (p *play) verdict(ctx context.Context, v *Verdict) error {
	req := &agentplanev1.RecordVerdictRequest{
		Node:     v.Node,
		Result:   &agentplanev1.VerdictResult{Verdict: v.Verdict, Confidence: v.Confidence, Scores: v.scores},
		Raised:   v.Raised,
		EndsTurn: v.EndsTurn,
	}
	if req.Node == "" {
		req.Node = p.node
	}
	if v.Rationale != "" {
		req.Result.Rationale = &v.Rationale
	}
	var open []*agentplanev1.Obligation // read once, when a resolution names one by text
	for _, res := range v.Resolved {
		id := res.ID
		if id == "" {
			if open == nil {
				var err error
				if open, err = p.openObligations(ctx); err != nil {
					return err
				}
			}
			i, err := byText(open, res.Text)
			if err != nil {
				return err
			}
			id = open[i].GetObligationId()
			open = slices.Delete(open, i, i+1)
		}
		r := &agentplanev1.ObligationResolution{ObligationId: id, How: agentplanev1.ResolutionHow_RESOLUTION_HOW_ADDRESSED}
		if res.How == "withdrawn" {
			r.How = agentplanev1.ResolutionHow_RESOLUTION_HOW_WITHDRAWN
		}
		if res.Reason != "" {
			r.Reason = &res.Reason
		}
		req.Resolved = append(req.Resolved, r)
	}
	resp, err := p.t.RecordVerdict(ctx, req)
	if err != nil {
		return err
	}
	rec := resp.GetVerdict()
	line := fmt.Sprintf("verdict %s by %s recorded (%s); %d open obligations", v.Verdict, req.Node, rec.GetVerdictId(), len(resp.GetOpenObligations()))
	if d := rec.GetDroppedObligationIds(); len(d) > 0 {
		line += fmt.Sprintf("; dropped unknown ids %s", strings.Join(d, ", "))
	}
	p.r.logf(p.t, "%s", line)
	return nil
}

// openObligations reads the task's open obligations, in the order they were raised,
// from its history under the lease: each verdict_recorded event carries the
// obligations its verdict raised (with their ids) and the resolutions applied to the
// ledger. Runtimes may not call TaskService.ListObligations.
func (p *play) openObligations(ctx context.Context) ([]*agentplanev1.Obligation, error) {
	open := []*agentplanev1.Obligation{}
	err := p.t.History(ctx, 0, 0, func(ev *agentplanev1.TaskEvent) bool {
		v := ev.GetVerdictRecorded().GetVerdict()
		for _, r := range v.GetResolved() {
			open = slices.DeleteFunc(open, func(o *agentplanev1.Obligation) bool { return o.GetObligationId() == r.GetObligationId() })
		}
		open = append(open, v.GetRaised()...)
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("reading the task's history for its open obligations: %w", err)
	}
	return open, nil
}

// byText finds the open obligation raised with text. Two open obligations with the
// same text are refused rather than guessed between: the script must name one by id.
func byText(open []*agentplanev1.Obligation, text string) (int, error) {
	at := -1
	for i, o := range open {
		if o.GetText() != text {
			continue
		}
		if at >= 0 {
			return 0, fmt.Errorf("obligation %q is ambiguous: open obligations %s and %s were both raised with that text; resolve them by id",
				text, open[at].GetObligationId(), o.GetObligationId())
		}
		at = i
	}
	if at < 0 {
		return 0, fmt.Errorf("no open obligation raised as %q", text)
	}
	return at, nil
}

func continueText(msgs []*agentplanev1.Message) string {
	texts := make([]string, len(msgs))
	for i, m := range msgs {
		texts[i] = client.MessageText(m)
	}
	return strings.Join(texts, "\n")
}

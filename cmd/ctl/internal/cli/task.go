package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/ctl/internal/printer"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/spec"
)

func addTaskCommands(cmd *cobra.Command, g *globals) {
	cmd.AddCommand(
		newTaskStartCommand(g),
		newTaskGetCommand(g),
		newTaskListCommand(g),
		newTaskCancelCommand(g),
		newTaskContinueCommand(g),
		newTaskWatchCommand(g),
		newTaskVerdictsCommand(g),
		newTaskObligationsCommand(g),
	)
}

type taskStartOptions struct {
	agentFile, graphFile, agentID string
	input                         string
	requestID                     string
	labels                        []string
	policyFile                    string
	sessionID                     string
	queue                         string
	priority                      int32
	concurrencyKey                string
	concurrencyLimit              int32
	interruptTimeout              time.Duration
	view                          string
}

func newTaskStartCommand(g *globals) *cobra.Command {
	o := &taskStartOptions{}
	cmd := &cobra.Command{
		Use:   "start (--agent FILE | --graph FILE | --agent-id ID) --input TEXT",
		Short: "Start a task from an agent or graph spec file, or a static agent id",
		Long: "Start a task. The spec file (YAML or JSON, by extension) is sent as written and validated by the\n" +
			"server exactly as `ctl spec validate` does; an invalid spec never becomes a task.\n" +
			"With --request-id, repeating the command returns the same task instead of starting another.",
		Example: "  ctl task start --agent agent.yaml --input \"summarize the release notes\"\n" +
			"  ctl task start --agent-id billing-bot --input - < question.txt --label team=billing\n" +
			"  ctl task start --agent agent.yaml --policy policy.yaml --input \"refund order 42\" --request-id refund-42\n" +
			"  ctl task start --agent agent.yaml --input \"hi\" --queue gpu    # leased only by runtimes serving gpu",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := o.request(g.stdin)
			if err != nil {
				return err
			}
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Tasks.StartTask(ctx, req)
				if err != nil {
					return o.specViolations(cmd.ErrOrStderr(), err)
				}
				if !resp.GetCreated() && g.output == string(printer.Table) {
					fmt.Fprintf(cmd.ErrOrStderr(), "request id \"%s\" was used before: this is the task it started\n", printer.Text(req.GetRequestId()))
				}
				return g.printer(cmd).Message(resp, func(t *printer.Tab) { taskTable(t, resp.GetTask()) })
			})
		},
	}
	o.bindTemplate(cmd.Flags())
	cmd.Flags().StringVar(&o.requestID, "request-id", "", "idempotency key: a retry with the same key returns the same task")
	viewFlag(cmd, &o.view, "basic")
	return cmd
}

// bindTemplate adds the flags that say what a task runs and with what: ctl task
// start's, and the task template of ctl schedule create and update.
func (o *taskStartOptions) bindTemplate(f *pflag.FlagSet) {
	f.StringVar(&o.agentFile, "agent", "", "AgentSpec file (YAML or JSON)")
	f.StringVar(&o.graphFile, "graph", "", "GraphSpec file (YAML or JSON)")
	f.StringVar(&o.agentID, "agent-id", "", "static agent id from the deployment's agent table")
	f.StringVar(&o.input, "input", "", "the user's input (- reads standard input)")
	f.StringArrayVar(&o.labels, "label", nil, "label key=value (repeatable)")
	f.StringVar(&o.policyFile, "policy", "", "interrupt policy file (YAML or JSON): allowlist, denylist or predicate")
	f.StringVar(&o.sessionID, "session", "", "session id passed to policies and approval requests")
	f.StringVar(&o.queue, "queue", "", "run queue: only runtimes serving it lease the task (default: the default queue)")
	f.Int32Var(&o.priority, "priority", 0, "priority among your tasks of the queue, -5 (lowest) to 5 (highest)")
	f.StringVar(&o.concurrencyKey, "concurrency-key", "", "CEL key of the task's own concurrency cap, for example 'labels[\"customer\"]' (with --concurrency-limit)")
	f.Int32Var(&o.concurrencyLimit, "concurrency-limit", 0, "how many tasks of --concurrency-key may hold a lease at once (1 to 10000)")
	f.DurationVar(&o.interruptTimeout, "interrupt-timeout", 0, "deadline of each interrupt of this task (default: the deployment's)")
}

// viewFlag adds --view, naming the server's default for the command.
func viewFlag(cmd *cobra.Command, v *string, def string) {
	cmd.Flags().StringVar(v, "view", "", "how much of each task the server returns: basic (without the submitted spec) or full (default "+def+")")
}

// parseView reads --view; "" leaves the choice to the server's default for the RPC.
func parseView(s string) (agentplanev1.TaskView, error) {
	if s == "" {
		return agentplanev1.TaskView_TASK_VIEW_UNSPECIFIED, nil
	}
	v, ok := parseEnum(s, "TASK_VIEW_", agentplanev1.TaskView_value)
	if !ok {
		return 0, usageErr("--view %q: want one of %s", s, enumChoices("TASK_VIEW_", agentplanev1.TaskView_value))
	}
	return agentplanev1.TaskView(v), nil
}

func (o *taskStartOptions) request(stdin io.Reader) (*agentplanev1.StartTaskRequest, error) {
	switch n := countSet(o.agentFile, o.graphFile, o.agentID); {
	case n == 0:
		return nil, usageErr("say what runs: --agent FILE, --graph FILE or --agent-id ID")
	case n > 1:
		return nil, usageErr("--agent, --graph and --agent-id are alternatives; give one")
	}
	view, err := parseView(o.view)
	if err != nil {
		return nil, err
	}
	input := o.input
	if o.input == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, usageErr("reading the input from standard input: %v", err)
		}
		input = string(b)
	}
	req := &agentplanev1.StartTaskRequest{RequestId: o.requestID, Input: client.UserText(input), SessionId: o.sessionID, View: view, Queue: o.queue, Priority: o.priority}
	switch {
	case o.concurrencyKey != "" && o.concurrencyLimit > 0:
		req.Concurrency = &agentplanev1.ConcurrencyLimit{Key: o.concurrencyKey, Limit: o.concurrencyLimit}
	case o.concurrencyKey != "" || o.concurrencyLimit != 0:
		return nil, usageErr("--concurrency-key and --concurrency-limit go together (a limit of 1 to 10000)")
	}
	switch {
	case o.agentID != "":
		req.Source = &agentplanev1.StartTaskRequest_AgentId{AgentId: o.agentID}
	case o.agentFile != "":
		if err := readSpecDocument(req, "agent", o.agentFile, "AgentSpec"); err != nil {
			return nil, err
		}
	default:
		if err := readSpecDocument(req, "graph", o.graphFile, "GraphSpec"); err != nil {
			return nil, err
		}
	}
	labels, err := parseLabels("label", o.labels)
	if err != nil {
		return nil, err
	}
	req.Labels = labels
	if o.policyFile != "" {
		req.InterruptPolicy = &agentplanev1.InterruptPolicy{}
		if err := readJSONOrYAML(o.policyFile, req.InterruptPolicy); err != nil {
			return nil, err
		}
	}
	if o.interruptTimeout < 0 {
		return nil, usageErr("--interrupt-timeout must not be negative")
	}
	if o.interruptTimeout > 0 {
		req.InterruptTimeout = durationpb.New(o.interruptTimeout)
	}
	return req, nil
}

// specViolations prints every violation of a spec StartTask refused, as spec validate
// does, named after the file they are in, and returns the error to exit with. Other
// errors are returned as they are.
func (o *taskStartOptions) specViolations(w io.Writer, err error) error {
	violations := specViolationsOf(err)
	if len(violations) == 0 {
		return err
	}
	name := o.agentFile + o.graphFile // one of them, or neither for --agent-id
	if name == "" {
		name = "agent " + o.agentID
	}
	for _, v := range violations {
		fmt.Fprintln(w, printer.Text(spec.FormatViolation(name, v)))
	}
	noun := "violations"
	if len(violations) == 1 {
		noun = "violation"
	}
	return &exitError{code: exitFailed, err: fmt.Errorf("%s is invalid (%d %s); no task was started", name, len(violations), noun)}
}

// specViolationsOf returns the violations a refused spec carries: those of an invalid
// spec (SPEC_INVALID) and the DOC-TOO-LARGE finding of a document over the
// deployment's limits (LIMIT_EXCEEDED). Other errors have none.
func specViolationsOf(err error) []*agentplanev1.SpecViolation {
	switch reasons.Of(err) {
	case apierr.ReasonSpecInvalid, apierr.ReasonResourceExhausted:
	default:
		return nil
	}
	var violations []*agentplanev1.SpecViolation
	for _, d := range status.Convert(err).Details() {
		if sv, ok := d.(*agentplanev1.SpecViolations); ok {
			violations = append(violations, sv.GetViolations()...)
		}
	}
	return violations
}

func countSet(values ...string) int {
	n := 0
	for _, v := range values {
		if v != "" {
			n++
		}
	}
	return n
}

// readSpecDocument puts the file into req as a document. The server routes a
// document on its kind; the check here only catches --agent given a graph (and the
// reverse) with a message about the flag. Anything it cannot read is left to the
// server, which reports it with positions.
func readSpecDocument(req *agentplanev1.StartTaskRequest, flag, path, wantKind string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return usageErr("--%s: %v", flag, err)
	}
	var head struct {
		Kind string `yaml:"kind"`
	}
	if yaml.Unmarshal(b, &head) == nil && head.Kind != "" && head.Kind != wantKind {
		other := map[string]string{"AgentSpec": "--agent", "GraphSpec": "--graph"}[head.Kind]
		hint := ""
		if other != "" {
			hint = "; use " + other
		}
		return usageErr("--%s %s: the document is a %s, not a %s%s", flag, path, head.Kind, wantKind, hint)
	}
	req.Source = &agentplanev1.StartTaskRequest_Document{Document: b}
	req.Format = documentFormat(path)
	return nil
}

// taskTable prints one task as rows of name and value.
func taskTable(t *printer.Tab, task *agentplanev1.Task) {
	t.Row("TASK", task.GetTaskId())
	t.Row("state", stateName(task.GetState()))
	switch spec := task.GetSpec().(type) {
	case *agentplanev1.Task_Agent:
		t.Row("spec", "AgentSpec "+orDash(spec.Agent.GetName()))
	case *agentplanev1.Task_Graph:
		t.Row("spec", "GraphSpec "+orDash(spec.Graph.GetName()))
	case *agentplanev1.Task_AgentId:
		t.Row("spec", "agent id "+spec.AgentId)
	default: // the basic view leaves an inline spec out
		if k := task.GetSpecKind(); k != "" {
			t.Row("spec", k)
		}
	}
	t.Row("input", truncate(messageSummary(task.GetInput()), 120))
	t.Row("labels", labelsText(task.GetLabels()))
	t.Row("queue", orDash(task.GetQueue()))
	if p := task.GetPriority(); p != 0 {
		t.Row("priority", fmt.Sprint(p))
	}
	if c := task.GetConcurrency(); c != nil {
		t.Row("concurrency", fmt.Sprintf("%d per key %q (%s)", c.GetLimit(), task.GetConcurrencyKey(), c.GetKey()))
	}
	t.Row("request id", orDash(task.GetRequestId()))
	t.Row("created", when(task.GetCreateTime())+" by "+orDash(task.GetCreatedBy()))
	t.Row("updated", when(task.GetUpdateTime()))
	if task.GetEndTime() != nil {
		t.Row("ended", when(task.GetEndTime()))
	}
	t.Row("attempt", task.GetAttempt())
	t.Row("runtime", orDash(task.GetRuntimeId()))
	t.Row("events", task.GetLastSequence())
	if ids := task.GetPendingInterruptIds(); len(ids) > 0 {
		t.Row("pending interrupts", strings.Join(ids, ", "))
	}
	var peers []string
	for _, s := range task.GetEffectiveMcpServers() {
		peers = append(peers, peerText("mcp", s.GetName(), s.GetUrl(), s.GetHeaderNames()))
	}
	for _, p := range task.GetEffectiveA2APeers() {
		peers = append(peers, peerText("a2a", p.GetName(), p.GetUrl(), p.GetHeaderNames()))
	}
	if len(peers) > 0 {
		t.Row("servers", strings.Join(peers, "; "))
	}
	if task.GetCancelRequested() {
		t.Row("cancel requested", "yes")
	}
	if f := task.GetFailure(); f != nil {
		t.Row("failure", fmt.Sprintf("%s: %s", f.GetReason(), f.GetMessage()))
	}
	if out := task.GetOutput(); out != nil {
		t.Row("output", truncate(messageSummary(out.GetMessage()), 200))
		if out.GetStructured() != nil {
			t.Row("structured output", truncate(compactJSON(out.GetStructured()), 200))
		}
	}
}

// peerText is one effective MCP server or A2A peer: the server shows header names,
// never their values.
func peerText(kind, name, url string, headers []string) string {
	s := kind + " " + name + " " + url
	if len(headers) > 0 {
		s += " (headers: " + strings.Join(headers, ", ") + ")"
	}
	return s
}

// newTaskIDCommand builds a command taking one task id and printing the task that
// call returns.
func newTaskIDCommand(g *globals, use, short string, call func(ctx context.Context, c *client.Client, id string) (taskResponse, error)) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := call(ctx, c, args[0])
				if err != nil {
					return err
				}
				return g.printer(cmd).Message(resp, func(t *printer.Tab) { taskTable(t, resp.GetTask()) })
			})
		},
	}
}

// taskResponse is any response holding one task.
type taskResponse interface {
	proto.Message
	GetTask() *agentplanev1.Task
}

func newTaskGetCommand(g *globals) *cobra.Command {
	var viewName string
	cmd := newTaskIDCommand(g, "get TASK_ID", "Show a task", func(ctx context.Context, c *client.Client, id string) (taskResponse, error) {
		view, err := parseView(viewName)
		if err != nil {
			return nil, err
		}
		return c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: id, View: view})
	})
	viewFlag(cmd, &viewName, "full")
	return cmd
}

func newTaskCancelCommand(g *globals) *cobra.Command {
	var reason string
	cmd := newTaskIDCommand(g, "cancel TASK_ID", "Cancel a task (the runtime holding it learns on its next heartbeat)", func(ctx context.Context, c *client.Client, id string) (taskResponse, error) {
		return c.Tasks.CancelTask(ctx, &agentplanev1.CancelTaskRequest{TaskId: id, Reason: reason})
	})
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the task's log")
	return cmd
}

func newTaskContinueCommand(g *globals) *cobra.Command {
	var message string
	var outputs []string
	cmd := newTaskIDCommand(g, "continue TASK_ID (--message TEXT | --tool-output CALL_ID=JSON...)",
		"Resume a task paused for its caller: the user's next message (chat mode), or the outputs of client tool calls", func(ctx context.Context, c *client.Client, id string) (taskResponse, error) {
			req, err := continueRequest(id, message, outputs)
			if err != nil {
				return nil, err
			}
			return c.Tasks.ContinueTask(ctx, req)
		})
	cmd.Example = "  ctl task continue TASK_ID --message \"thanks!\"\n" +
		"  ctl task continue TASK_ID --tool-output call_1='{\"temp_c\":21}' --tool-output call_2='\"12:00\"'"
	cmd.Flags().StringVar(&message, "message", "", "the user's next message, for a task paused at the end of a turn")
	cmd.Flags().StringArrayVar(&outputs, "tool-output", nil, "CALL_ID=JSON: the output of a client tool call the task waits for (repeat for each pending call)")
	return cmd
}

// continueRequest builds a ContinueTaskRequest from --message or --tool-output.
func continueRequest(id, message string, outputs []string) (*agentplanev1.ContinueTaskRequest, error) {
	req := &agentplanev1.ContinueTaskRequest{TaskId: id}
	switch {
	case message != "" && len(outputs) > 0:
		return nil, usageErr("--message and --tool-output are alternatives: a task waits for one or the other")
	case message != "":
		req.Input = &agentplanev1.ContinueTaskRequest_Message{Message: client.UserText(message)}
		return req, nil
	case len(outputs) == 0:
		return nil, usageErr("give --message TEXT, or --tool-output CALL_ID=JSON for each call the task waits for")
	}
	outs := &agentplanev1.ToolOutputs{}
	for _, o := range outputs {
		callID, text, ok := strings.Cut(o, "=")
		if !ok || callID == "" {
			return nil, usageErr("--tool-output %q: want CALL_ID=JSON", o)
		}
		v := &structpb.Value{}
		if err := protojson.Unmarshal([]byte(text), v); err != nil {
			return nil, usageErr("--tool-output %s: the output is not valid JSON (quote a string as '\"text\"'): %v", callID, err)
		}
		outs.Outputs = append(outs.Outputs, &agentplanev1.ToolOutput{CallId: callID, Result: v})
	}
	req.Input = &agentplanev1.ContinueTaskRequest_ToolOutputs{ToolOutputs: outs}
	return req, nil
}

type taskListOptions struct {
	states    []string
	labels    []string
	queue     string
	limit     int32
	pageToken string
	view      string
}

func newTaskListCommand(g *globals) *cobra.Command {
	o := &taskListOptions{}
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List tasks, newest first",
		Example: "  ctl task list --state working --state input_required\n  ctl task list --label team=billing --limit 20",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			view, err := parseView(o.view)
			if err != nil {
				return err
			}
			req := &agentplanev1.ListTasksRequest{PageSize: o.limit, PageToken: o.pageToken, View: view, Queue: o.queue}
			for _, s := range o.states {
				v, ok := parseEnum(s, "TASK_STATE_", agentplanev1.TaskState_value)
				if !ok {
					return usageErr("--state %q: want one of %s", s, enumChoices("TASK_STATE_", agentplanev1.TaskState_value))
				}
				req.States = append(req.States, agentplanev1.TaskState(v))
			}
			labels, err := parseLabels("label", o.labels)
			if err != nil {
				return err
			}
			for _, k := range slices.Sorted(maps.Keys(labels)) {
				req.LabelSelector = append(req.LabelSelector, k+"="+labels[k])
			}
			if o.limit < 0 {
				return usageErr("--limit must not be negative")
			}
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Tasks.ListTasks(ctx, req)
				if err != nil {
					return err
				}
				now := time.Now()
				err = g.printer(cmd).Message(resp, func(t *printer.Tab) {
					t.Row("TASK", "STATE", "CREATED", "AGE", "ATTEMPT", "LABELS")
					for _, task := range resp.GetTasks() {
						t.Row(task.GetTaskId(), stateName(task.GetState()), when(task.GetCreateTime()), age(task.GetCreateTime(), now), task.GetAttempt(), labelsText(task.GetLabels()))
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
	f.StringSliceVar(&o.states, "state", nil, "only tasks in these states (repeatable or comma-separated): "+enumChoices("TASK_STATE_", agentplanev1.TaskState_value))
	f.StringArrayVar(&o.labels, "label", nil, "only tasks with this label key=value (repeatable; all must match)")
	f.StringVar(&o.queue, "queue", "", "only tasks of this run queue")
	f.Int32Var(&o.limit, "limit", 0, "tasks per page (server default 50, at most 500)")
	f.StringVar(&o.pageToken, "page-token", "", "continue a listing from the token a previous page printed")
	viewFlag(cmd, &o.view, "basic")
	return cmd
}

// nextPageHint tells a person how to get the next page, on stderr so that the table
// on stdout stays a table.
func nextPageHint(cmd *cobra.Command, token string) {
	if token != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "more: --page-token %s\n", printer.Text(token))
	}
}

func newTaskVerdictsCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "verdicts TASK_ID",
		Short: "List a task's reviewer verdicts, in order",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				all := &agentplanev1.ListVerdictsResponse{}
				req := &agentplanev1.ListVerdictsRequest{TaskId: args[0]}
				for {
					resp, err := c.Tasks.ListVerdicts(ctx, req)
					if err != nil {
						return err
					}
					all.Verdicts = append(all.Verdicts, resp.GetVerdicts()...)
					if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
						break
					}
				}
				return g.printer(cmd).Message(all, func(t *printer.Tab) {
					t.Row("VERDICT", "NODE", "RESULT", "CONFIDENCE", "RAISED", "RESOLVED", "DROPPED", "SEQ", "RECORDED", "RATIONALE")
					for _, v := range all.GetVerdicts() {
						conf := "-"
						if v.GetResult().Confidence != nil {
							conf = fmt.Sprintf("%.2f", v.GetResult().GetConfidence())
						}
						var raised, resolved []string
						for _, o := range v.GetRaised() {
							raised = append(raised, o.GetObligationId())
						}
						for _, r := range v.GetResolved() {
							resolved = append(resolved, r.GetObligationId()+":"+enumName(r.GetHow(), "RESOLUTION_HOW_"))
						}
						t.Row(v.GetVerdictId(), v.GetNode(), v.GetResult().GetVerdict(), conf, orNone(raised), orNone(resolved),
							orNone(v.GetDroppedObligationIds()), v.GetSequence(), when(v.GetCreateTime()), truncate(orDash(v.GetResult().GetRationale()), 60))
					}
				})
			})
		},
	}
}

func newTaskObligationsCommand(g *globals) *cobra.Command {
	var states []string
	cmd := &cobra.Command{
		Use:   "obligations TASK_ID",
		Short: "Show a task's obligations ledger",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &agentplanev1.ListObligationsRequest{TaskId: args[0]}
			for _, s := range states {
				v, ok := parseEnum(s, "OBLIGATION_STATE_", agentplanev1.ObligationState_value)
				if !ok {
					return usageErr("--state %q: want one of %s", s, enumChoices("OBLIGATION_STATE_", agentplanev1.ObligationState_value))
				}
				req.States = append(req.States, agentplanev1.ObligationState(v))
			}
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				all := &agentplanev1.ListObligationsResponse{}
				for {
					resp, err := c.Tasks.ListObligations(ctx, req)
					if err != nil {
						return err
					}
					all.Obligations = append(all.Obligations, resp.GetObligations()...)
					if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
						break
					}
				}
				return g.printer(cmd).Message(all, func(t *printer.Tab) {
					t.Row("OBLIGATION", "STATE", "RAISED BY", "IN", "RESOLVED IN", "TEXT", "REASON")
					for _, o := range all.GetObligations() {
						t.Row(o.GetObligationId(), enumName(o.GetState(), "OBLIGATION_STATE_"), o.GetRaisedBy(), o.GetRaisedInVerdictId(),
							orDash(o.GetResolvedInVerdictId()), truncate(o.GetText(), 60), truncate(orDash(o.GetReason()), 40))
					}
				})
			})
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only obligations in these states: "+enumChoices("OBLIGATION_STATE_", agentplanev1.ObligationState_value))
	return cmd
}

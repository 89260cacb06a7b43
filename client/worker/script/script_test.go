package script

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/client/worker/workertest"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
)

const examples = "../../../examples/runtime"

func TestExamplesParse(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(examples, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, p := range paths {
		if strings.HasSuffix(p, ".agent.yaml") || strings.HasSuffix(p, ".policy.yaml") {
			continue // the agent and policy the scripts are played for
		}
		t.Run(filepath.Base(p), func(t *testing.T) {
			if _, err := Load(p); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"no steps", "node: a\n", []string{"no steps"}},
		{"unknown key at top", "stepz: []\n", []string{"stepz"}},
		{"unknown step kind", "steps:\n  - shout: hi\n  - complete: ok\n", []string{"shout"}},
		{"two kinds in a step", "steps:\n  - say: hi\n    note: n\n  - complete: ok\n", []string{"t.yaml:2: step 1: one kind per step, got say and note"}},
		{"empty step", "steps:\n  - {}\n  - complete: ok\n", []string{"step 1: empty step"}},
		{"tool without name", "steps:\n  - tool: {args: {a: 1}}\n  - complete: ok\n", []string{"t.yaml:2: step 1: tool needs a name"}},
		{"unknown tool field", "steps:\n  - tool: {name: x, wiat: durable}\n  - complete: ok\n", []string{"wiat"}},
		{"bad wait", "steps:\n  - tool: {name: x, wait: later}\n  - complete: ok\n", []string{`tool wait "later"`}},
		{"bad on_reject", "steps:\n  - tool: {name: x, on_reject: retry}\n  - complete: ok\n", []string{`on_reject "retry"`}},
		{"bad annotations", "steps:\n  - tool: {name: x, annotations: {destructiveHint: maybe}}\n  - complete: ok\n", []string{"tool annotations"}},
		{"verdict without verdict", "steps:\n  - verdict: {node: r}\n  - complete: ok\n", []string{"verdict needs a verdict"}},
		{"resolution by id and text", "steps:\n  - verdict: {verdict: pass, resolved: [{id: a, text: b, how: addressed}]}\n  - complete: ok\n", []string{"by id or by text, not both"}},
		{"resolution how", "steps:\n  - verdict: {verdict: pass, resolved: [{id: a, how: done}]}\n  - complete: ok\n", []string{`how "done"`}},
		{"fail without reason", "steps:\n  - fail: {message: m}\n", []string{"fail needs a reason"}},
		{"bad sleep", "steps:\n  - sleep: soon\n  - complete: ok\n", []string{`[2:12] "soon" is not a duration`}},
		{"step after complete", "steps:\n  - complete: ok\n  - say: hi\n  - complete: ok\n", []string{"step 1: complete ends the task"}},
		{"does not end", "steps:\n  - say: hi\n  - pause: more?\n", []string{"t.yaml:3: step 2: the last step must be complete or fail"}},
		{"all errors reported", "steps:\n  - tool: {}\n  - verdict: {}\n  - say: hi\n", []string{"step 1: tool needs a name", "step 2: verdict needs", "step 3: the last step"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.doc))
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseValues(t *testing.T) {
	s, err := Parse("t.yaml", []byte(`steps:
  - tool:
      name: pay
      args: {amount: 12345678901234567, to: [a, b], note: null, html: "<b>&</b>"}
      annotations: {destructiveHint: true}
  - tool:
      name: raw
      args_json: '{"amount": 1.50, "x":'
  - tool:
      name: none
  - verdict: {verdict: pass, scores: {style: 0.5}}
  - sleep: 5ms
  - complete: {text: done, structured: {ok: true}}
`))
	if err != nil {
		t.Fatal(err)
	}
	tool := s.Steps[0].Tool
	// Integers keep every digit in the JSON text, "<" and "&" are not HTML-escaped;
	// args_json is sent as written.
	if want := `{"amount":12345678901234567,"html":"<b>&</b>","note":null,"to":["a","b"]}`; tool.args != want {
		t.Errorf("args = %s, want %s", tool.args, want)
	}
	if got := s.Steps[1].Tool.args; got != `{"amount": 1.50, "x":` {
		t.Errorf("args_json = %s", got)
	}
	if got := s.Steps[2].Tool.args; got != `{}` {
		t.Errorf("absent args = %s", got)
	}
	s.Steps = append(s.Steps[:1], s.Steps[3:]...)
	if !tool.annotations.GetDestructiveHint() || s.Steps[0].Line != 2 {
		t.Errorf("annotations %v line %d", tool.annotations, s.Steps[0].Line)
	}
	if s.Steps[1].Verdict.scores["style"].GetNumberValue() != 0.5 || time.Duration(*s.Steps[2].Sleep) != 5*time.Millisecond {
		t.Errorf("scores or sleep not decoded")
	}
	if out := s.Steps[3].Complete; out.Text != "done" || !out.Structured.GetStructValue().GetFields()["ok"].GetBoolValue() {
		t.Errorf("complete %+v", out)
	}
}

// runScript starts a worker playing sc against the fake for maxTasks leases.
func runScript(t *testing.T, f *workertest.Server, sc *Script, maxTasks int) (chan error, *testutil.SyncBuffer) {
	t.Helper()
	progress := &testutil.SyncBuffer{}
	r := &Runner{Script: sc, Progress: progress}
	w, err := worker.New(f.Runtime(), r, worker.Options{
		RuntimeID: "script-test",
		MaxTasks:  maxTasks,
		PollWait:  200 * time.Millisecond,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return done, progress
}

func waitDone(t *testing.T, done chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		done <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("worker did not finish")
	}
}

func interruptFor(tools map[string]string) func(*agentplanev1.CheckToolCallRequest) *agentplanev1.CheckToolCallResponse {
	return func(req *agentplanev1.CheckToolCallRequest) *agentplanev1.CheckToolCallResponse {
		id, gated := tools[req.GetToolName()]
		if !gated {
			return &agentplanev1.CheckToolCallResponse{Outcome: agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW}
		}
		return &agentplanev1.CheckToolCallResponse{
			Outcome: agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT,
			Interrupt: &agentplanev1.Interrupt{
				InterruptId: id, CallId: req.GetCallId(), Kind: agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL,
				State: agentplanev1.InterruptState_INTERRUPT_STATE_PENDING,
			},
		}
	}
}

// TestApprovalExample plays examples/runtime/approval.yaml through every kind of
// lease it needs: an interactive approval, a durable suspension resumed with its
// decision, and a chat pause continued with a message.
func TestApprovalExample(t *testing.T) {
	sc, err := Load(filepath.Join(examples, "approval.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f := workertest.New(t)
	f.Do(func(s *workertest.State) {
		s.Gate = interruptFor(map[string]string{"send_email": "i-email", "issue_refund": "i-refund"})
	})
	f.Enqueue("t1", func(l *agentplanev1.Lease) { l.Task.Input = client.UserText("refund order 42") })
	done, progress := runScript(t, f, sc, 3)

	f.WaitFor(t, "the runtime awaiting the email decision", func(s *workertest.State) bool { return s.Awaiting["i-email"] > 0 })
	f.Resolve("i-email", &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_APPROVE, DecidedBy: "owner"})

	f.WaitFor(t, "the durable suspension", func(s *workertest.State) bool { return s.Ends["t1"] == workertest.Suspended })
	var refundCall *agentplanev1.CheckToolCallRequest
	f.Do(func(s *workertest.State) { refundCall = s.Checks[len(s.Checks)-1] })
	f.Requeue("t1", func(l *agentplanev1.Lease) {
		l.ResolvedInterrupts = []*agentplanev1.Interrupt{{
			InterruptId: "i-refund", CallId: refundCall.GetCallId(), Kind: agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL,
			State:    agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED,
			Decision: &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_APPROVE, ArgumentsJson: refundCall.GetArgumentsJson(), DecidedBy: "owner"},
		}}
	})

	f.WaitFor(t, "the chat pause", func(s *workertest.State) bool { return s.Ends["t1"] == workertest.Paused })
	f.Requeue("t1", func(l *agentplanev1.Lease) { l.ContinueMessages = []*agentplanev1.Message{client.UserText("thanks!")} })
	waitDone(t, done)

	var s workertest.State
	f.Do(func(st *workertest.State) { s = *st })
	if s.Ends["t1"] != workertest.Completed {
		t.Fatalf("end %q failure %v\nprogress:\n%s", s.Ends["t1"], s.Failures["t1"], progress)
	}
	if out := s.Outputs["t1"]; client.MessageText(out.GetMessage()) != "Refunded order 42." || out.GetStructured().GetStructValue().GetFields()["refund_id"].GetStringValue() != "R-42" {
		t.Errorf("output %v", out)
	}
	if len(s.Checks) != 3 {
		t.Errorf("want 3 gate checks (the resumed refund uses its decision), got %d", len(s.Checks))
	}
	if p := s.Pauses["t1"]; client.MessageText(p.GetMessage()) != "The refund is on its way. Anything else?" || p.GetNode() != "support" {
		t.Errorf("pause %v", p)
	}

	// The log, one line per event, in order.
	var got []string
	for _, ev := range s.Events["t1"] {
		switch p := ev.GetPayload().(type) {
		case *agentplanev1.RuntimeEvent_Message:
			got = append(got, "say "+client.MessageText(p.Message))
		case *agentplanev1.RuntimeEvent_ToolCall:
			got = append(got, "call "+p.ToolCall.GetToolName()+" "+p.ToolCall.GetCallId())
		case *agentplanev1.RuntimeEvent_ToolResult:
			got = append(got, "result "+p.ToolResult.GetToolName())
		case *agentplanev1.RuntimeEvent_Note:
			got = append(got, "checkpoint "+p.Note.GetAttributes()[checkpointAttr])
		}
	}
	want := []string{
		"say Looking up order 42.",
		"call lookup_order step-2", "result lookup_order",
		"checkpoint 2", // the interactive wait: a runtime stopped in it suspends, and the next lease replays step 3
		"call send_email step-3", "result send_email",
		"checkpoint 3", // before the durable call: the next lease replays step 4
		"checkpoint 3", // the replay writes it again, then finds the decision
		"call issue_refund step-4", "result issue_refund",
		"checkpoint 5", // before the pause: the next lease starts at step 6
		"say You said: thanks!",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, line := range []string{"tool lookup_order allowed", "tool send_email needs approval: interrupt i-email", "tool send_email approved by owner",
		"suspended until the decision on tool issue_refund", "turn ended", "completed"} {
		if !strings.Contains(progress.String(), line) {
			t.Errorf("progress lacks %q:\n%s", line, progress)
		}
	}
}

// TestReviewExample plays examples/runtime/review.yaml: two verdicts on one ledger,
// the second resolving by its text the obligation the first raised.
func TestReviewExample(t *testing.T) {
	sc, err := Load(filepath.Join(examples, "review.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f := workertest.New(t)
	f.Enqueue("t1", nil)
	done, progress := runScript(t, f, sc, 1)
	waitDone(t, done)
	var s workertest.State
	f.Do(func(st *workertest.State) { s = *st })
	if s.Ends["t1"] != workertest.Completed || len(s.Verdicts) != 2 {
		t.Fatalf("end %q verdicts %v\nprogress:\n%s", s.Ends["t1"], s.Verdicts, progress)
	}
	first, second := s.Verdicts[0], s.Verdicts[1]
	if first.GetNode() != "critic" || first.GetResult().GetRationale() == "" || first.GetResult().GetConfidence() != 0.7 ||
		first.GetRaised()[0] != "add a backup step before the migration" {
		t.Errorf("first verdict %v", first)
	}
	wantRes := &agentplanev1.ObligationResolution{ObligationId: "ob-1", How: agentplanev1.ResolutionHow_RESOLUTION_HOW_ADDRESSED}
	if len(second.GetResolved()) != 1 || !proto.Equal(second.GetResolved()[0], wantRes) {
		t.Errorf("second verdict resolved %v, want the obligation found by its text", second.GetResolved())
	}
	if o := s.Obligations["t1"]; len(o) != 1 || o[0].GetState() != agentplanev1.ObligationState_OBLIGATION_STATE_ADDRESSED {
		t.Errorf("ledger %v", o)
	}
	if !strings.Contains(progress.String(), "verdict pass by critic recorded (v2); 0 open obligations") {
		t.Errorf("progress:\n%s", progress)
	}
}

// TestResolveByText: a resolution by text names the open obligation raised with that
// text, read from verdict_recorded events in the task's history: an obligation
// already resolved is not a candidate, and two open ones with the text are refused
// as ambiguous rather than guessed between.
func TestResolveByText(t *testing.T) {
	for _, tc := range []struct {
		name, steps string
		wantIDs     []string // the ids the last verdict resolved; nil: the task fails
		wantFailure string
	}{
		{"raised again after its resolution", `
  - verdict: {verdict: needs_revision, rationale: r, raised: [backup, docs]}
  - verdict: {verdict: needs_revision, rationale: r, resolved: [{text: backup, how: addressed}], raised: [backup]}
  - verdict: {verdict: pass, resolved: [{text: backup, how: addressed}, {text: docs, how: withdrawn, reason: later}]}`,
			[]string{"ob-3", "ob-2"}, ""},
		{"ambiguous", `
  - verdict: {verdict: needs_revision, rationale: r, raised: [backup]}
  - verdict: {verdict: needs_revision, rationale: r, raised: [backup]}
  - verdict: {verdict: pass, resolved: [{text: backup, how: addressed}]}`,
			nil, `obligation "backup" is ambiguous: open obligations ob-1 and ob-2`},
		{"not open", `
  - verdict: {verdict: needs_revision, rationale: r, raised: [backup]}
  - verdict: {verdict: pass, resolved: [{text: backup, how: addressed}, {text: backup, how: addressed}]}`,
			nil, `no open obligation raised as "backup"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := Parse("t.yaml", []byte("node: critic\nsteps:"+tc.steps+"\n  - complete: done\n"))
			if err != nil {
				t.Fatal(err)
			}
			f := workertest.New(t)
			f.Enqueue("t1", nil)
			done, progress := runScript(t, f, sc, 1)
			waitDone(t, done)
			var s workertest.State
			f.Do(func(st *workertest.State) { s = *st })
			if tc.wantIDs == nil {
				if s.Ends["t1"] != workertest.Failed || !strings.Contains(s.Failures["t1"].GetMessage(), tc.wantFailure) {
					t.Fatalf("end %q failure %v, want one saying %q\nprogress:\n%s", s.Ends["t1"], s.Failures["t1"], tc.wantFailure, progress)
				}
				return
			}
			if s.Ends["t1"] != workertest.Completed {
				t.Fatalf("end %q failure %v\nprogress:\n%s", s.Ends["t1"], s.Failures["t1"], progress)
			}
			var got []string
			for _, r := range s.Verdicts[len(s.Verdicts)-1].GetResolved() {
				got = append(got, r.GetObligationId())
			}
			if !slices.Equal(got, tc.wantIDs) {
				t.Errorf("last verdict resolved %v, want %v", got, tc.wantIDs)
			}
		})
	}
}

func TestRejection(t *testing.T) {
	for _, tc := range []struct {
		name, onReject string
		wantEnd        string
	}{
		{"continue reports the rejection and goes on", "continue", workertest.Completed},
		{"fail ends the task", "fail", workertest.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := Parse("t.yaml", []byte("steps:\n  - tool: {name: wipe, on_reject: "+tc.onReject+"}\n  - complete: done\n"))
			if err != nil {
				t.Fatal(err)
			}
			f := workertest.New(t)
			f.Do(func(s *workertest.State) {
				s.Gate = func(*agentplanev1.CheckToolCallRequest) *agentplanev1.CheckToolCallResponse {
					return &agentplanev1.CheckToolCallResponse{
						Outcome:  agentplanev1.GateOutcome_GATE_OUTCOME_REJECT,
						Decision: &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_REJECT, ModelReason: proto.String("hitl disabled")},
					}
				}
			})
			f.Enqueue("t1", nil)
			done, _ := runScript(t, f, sc, 1)
			waitDone(t, done)
			var s workertest.State
			f.Do(func(st *workertest.State) { s = *st })
			if s.Ends["t1"] != tc.wantEnd {
				t.Fatalf("end %q", s.Ends["t1"])
			}
			ev := s.Events["t1"]
			// The rejected call is in the transcript, with its error result.
			if len(ev) != 2 || ev[0].GetToolCall().GetCallId() != "step-1" || !ev[1].GetToolResult().GetIsError() ||
				ev[1].GetToolResult().GetResult().GetStringValue() != "hitl disabled" {
				t.Fatalf("events %v", ev)
			}
			if tc.wantEnd == workertest.Failed && s.Failures["t1"].GetReason() != "tool.rejected" {
				t.Fatalf("failure %v", s.Failures["t1"])
			}
		})
	}
}

func TestTemplates(t *testing.T) {
	sc, err := Parse("t.yaml", []byte("node: bot\nsteps:\n  - say: 'input={{input}}'\n  - complete: 'done with {{input}}'\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := workertest.New(t)
	f.Enqueue("t1", func(l *agentplanev1.Lease) { l.Task.Input = client.UserText("hi") })
	done, _ := runScript(t, f, sc, 1)
	waitDone(t, done)
	var s workertest.State
	f.Do(func(st *workertest.State) { s = *st })
	msg := s.Events["t1"][0].GetMessage()
	if client.MessageText(msg) != "input=hi" || msg.GetNode() != "bot" || client.MessageText(s.Outputs["t1"].GetMessage()) != "done with hi" {
		t.Fatalf("message %v output %v", msg, s.Outputs["t1"])
	}
}

func TestLoadMissingFile(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "nope.yaml")); !os.IsNotExist(err) {
		t.Fatalf("want not-exist, got %v", err)
	}
}

// TestForeignCheckpointIsRefused: a task resumed on a runtime playing another script
// than the one that wrote its checkpoint fails with a reason that names both, instead
// of resuming at some step of the wrong script.
func TestForeignCheckpointIsRefused(t *testing.T) {
	approval, err := Load(filepath.Join(examples, "approval.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	hello, err := Load(filepath.Join(examples, "hello.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		attrs map[string]string
		want  string
	}{
		{"another script", map[string]string{checkpointAttr: "1", scriptAttr: approval.ID}, "written by " + approval.ID},
		{"unsigned", map[string]string{checkpointAttr: "1"}, "did not sign it"},
		{"past the end", map[string]string{checkpointAttr: "99", scriptAttr: hello.ID}, `names step "99"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := workertest.New(t)
			f.Do(func(s *workertest.State) {
				s.Events["t1"] = []*agentplanev1.RuntimeEvent{{Payload: &agentplanev1.RuntimeEvent_Note{
					Note: &agentplanev1.RuntimeNote{Text: "script checkpoint", Attributes: tc.attrs}}}}
			})
			f.Enqueue("t1", func(l *agentplanev1.Lease) { l.Attempt, l.HistoryCursor = 2, 1 })
			done, progress := runScript(t, f, hello, 1)
			waitDone(t, done)
			f.Do(func(s *workertest.State) {
				fail := s.Failures["t1"]
				if s.Ends["t1"] != workertest.Failed || fail.GetReason() != ReasonForeignCheckpoint ||
					!strings.Contains(fail.GetMessage(), tc.want) || !strings.Contains(fail.GetMessage(), hello.ID) {
					t.Fatalf("ended %q with %v; want %s naming %q and %s\nprogress:\n%s", s.Ends["t1"], fail, ReasonForeignCheckpoint, tc.want, hello.ID, progress)
				}
				if len(s.Events["t1"]) != 1 {
					t.Fatalf("the refused task was played: %v", s.Events["t1"][1:])
				}
			})
		})
	}
}

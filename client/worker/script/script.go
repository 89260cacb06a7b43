package script

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Script is a fixed list of steps played for every leased task.
type Script struct {
	// Name is the file name, used in messages.
	Name string `yaml:"-"`
	// ID identifies the script: its name and a digest of its text. Checkpoints carry
	// it, so a runtime never resumes a task from a checkpoint another script wrote.
	ID string `yaml:"-"`
	// Node is the agent (graph node) named on messages, tool calls, pauses and, by
	// default, verdicts; default the leased agent's name, else "agent".
	Node string `yaml:"node"`
	// Steps are played in order.
	Steps []Step `yaml:"steps"`
}

// Step is one step: exactly one of its fields is set.
type Step struct {
	// Line is where the step starts in the file.
	Line int `yaml:"-"`

	Say      *string   `yaml:"say"`      // an assistant message
	Note     *string   `yaml:"note"`     // a runtime note
	Tool     *Tool     `yaml:"tool"`     // a tool call through the gate
	Pause    *string   `yaml:"pause"`    // end the turn with this message; wait for the user
	Verdict  *Verdict  `yaml:"verdict"`  // an evaluator's verdict
	Sleep    *Duration `yaml:"sleep"`    // wait (for demos)
	Complete *Output   `yaml:"complete"` // end the task with an output
	Fail     *Fail     `yaml:"fail"`     // end the task as failed
}

// Kind names the step's kind ("say", "tool", ...).
func (s *Step) Kind() string {
	kinds := s.kinds()
	if len(kinds) == 1 {
		return kinds[0]
	}
	return ""
}

func (s *Step) kinds() []string {
	var k []string
	for _, c := range []struct {
		name string
		set  bool
	}{
		{"say", s.Say != nil}, {"note", s.Note != nil}, {"tool", s.Tool != nil}, {"pause", s.Pause != nil},
		{"verdict", s.Verdict != nil}, {"sleep", s.Sleep != nil}, {"complete", s.Complete != nil}, {"fail", s.Fail != nil},
	} {
		if c.set {
			k = append(k, c.name)
		}
	}
	return k
}

// stepFields is Step without the custom decoding, to decode into.
type stepFields Step

// UnmarshalYAML decodes a step strictly and remembers its line.
func (s *Step) UnmarshalYAML(node ast.Node) error {
	var f stepFields
	if err := yaml.NodeToValue(node, &f, yaml.Strict()); err != nil {
		return err
	}
	*s = Step(f)
	s.Line = node.GetToken().Position.Line
	return nil
}

// Tool is a tool call step. The call goes through the gate (CheckToolCall); when it
// may run, the script reports Result as what the tool returned.
type Tool struct {
	// ID is the call id; default "step-N". It must be stable: a resumed task finds
	// its decision by it.
	ID string `yaml:"id"`
	// Name of the tool. Required.
	Name string `yaml:"name"`
	// Description of the tool, for the policy and the reviewer.
	Description string `yaml:"description"`
	// Args the "model" produced, as YAML; sent as their JSON text ({} when absent).
	Args any `yaml:"args"`
	// ArgsJSON is the arguments as raw JSON text, sent exactly as written (it may be
	// malformed, as a model's can be). Exclusive with Args.
	ArgsJSON string `yaml:"args_json"`
	// Result the "tool" returns when it runs.
	Result any `yaml:"result"`
	// Error marks Result as a tool error.
	Error bool `yaml:"error"`
	// Wait is how a gated call waits: "interactive" or "durable"; default the
	// Runner's (interactive unless Runner.Durable).
	Wait string `yaml:"wait"`
	// OnReject is what a rejection does: "continue" (default: the rejection is
	// reported as an error result and the script goes on) or "fail" (the task fails).
	OnReject string `yaml:"on_reject"`
	// Trip is the model round-trip index.
	Trip int32 `yaml:"trip"`
	// Annotations are MCP tool annotations (readOnlyHint, destructiveHint, ...).
	Annotations map[string]any `yaml:"annotations"`

	args        string
	result      *structpb.Value
	annotations *agentplanev1.McpToolAnnotations
}

// Verdict is an evaluator's verdict step.
type Verdict struct {
	// Node is the evaluator node; default the script's node.
	Node string `yaml:"node"`
	// Verdict is pass, fail or needs_revision.
	Verdict string `yaml:"verdict"`
	// Confidence in [0, 1].
	Confidence *float64 `yaml:"confidence"`
	// Rationale, required unless the verdict is pass.
	Rationale string `yaml:"rationale"`
	// Scores are extra scores, kept as given.
	Scores map[string]any `yaml:"scores"`
	// Resolved are obligations this verdict resolves.
	Resolved []Resolution `yaml:"resolved"`
	// Raised are new obligations.
	Raised []string `yaml:"raised"`
	// EndsTurn says whether recording ends the reviewer's turn.
	EndsTurn bool `yaml:"ends_turn"`

	scores map[string]*structpb.Value
}

// Resolution resolves one obligation, named by its ledger id or, since the server
// assigns ids, by the text it was raised with (looked up among the open ones).
type Resolution struct {
	ID     string `yaml:"id"`
	Text   string `yaml:"text"`
	How    string `yaml:"how"` // addressed or withdrawn
	Reason string `yaml:"reason"`
}

// Output is a task's output: a string, or {text, structured}.
type Output struct {
	Text       string
	Structured *structpb.Value
}

// UnmarshalYAML accepts a string or a mapping.
func (o *Output) UnmarshalYAML(node ast.Node) error {
	if node.Type() == ast.StringType {
		return yaml.NodeToValue(node, &o.Text)
	}
	var f struct {
		Text       string `yaml:"text"`
		Structured any    `yaml:"structured"`
	}
	if err := yaml.NodeToValue(node, &f, yaml.Strict()); err != nil {
		return err
	}
	o.Text = f.Text
	if f.Structured != nil {
		v, err := structpb.NewValue(f.Structured)
		if err != nil {
			return fmt.Errorf("structured: %w", err)
		}
		o.Structured = v
	}
	return nil
}

// Fail is a failure step.
type Fail struct {
	Reason  string `yaml:"reason"`
	Message string `yaml:"message"`
	Retry   bool   `yaml:"retry"`
}

// Duration is a Go duration string ("500ms").
type Duration time.Duration

// UnmarshalYAML parses the duration.
func (d *Duration) UnmarshalYAML(node ast.Node) error {
	var s string
	if err := yaml.NodeToValue(node, &s); err != nil {
		return err
	}
	pos := node.GetToken().Position
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("[%d:%d] %q is not a duration such as 500ms or 2s", pos.Line, pos.Column, s)
	}
	*d = Duration(v)
	return nil
}

// Load reads and checks a script file.
func Load(path string) (*Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(filepath.Base(path), b)
}

// Parse decodes and checks a script; name is used in error messages.
func Parse(name string, data []byte) (*Script, error) {
	s := &Script{}
	if err := yaml.UnmarshalWithOptions(data, s, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("%s: %s", name, yaml.FormatError(err, false, true))
	}
	s.Name = name
	sum := sha256.Sum256(data)
	s.ID = name + "@sha256:" + hex.EncodeToString(sum[:8])
	if len(s.Steps) == 0 {
		return nil, fmt.Errorf("%s: no steps", name)
	}
	var errs []error
	for i := range s.Steps {
		if err := s.check(i); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: step %d: %w", name, s.Steps[i].Line, i+1, err))
		}
	}
	last := &s.Steps[len(s.Steps)-1]
	if k := last.Kind(); k != "" && k != "complete" && k != "fail" {
		errs = append(errs, fmt.Errorf("%s:%d: step %d: the last step must be complete or fail, so that every task ends (got %s)", name, last.Line, len(s.Steps), k))
	}
	return s, errors.Join(errs...)
}

// check validates step i and prepares its protobuf values.
func (s *Script) check(i int) error {
	st := &s.Steps[i]
	kinds := st.kinds()
	switch {
	case len(kinds) == 0:
		return errors.New("empty step; want one of say, note, tool, pause, verdict, sleep, complete, fail")
	case len(kinds) > 1:
		return fmt.Errorf("one kind per step, got %s", strings.Join(kinds, " and "))
	}
	if k := kinds[0]; (k == "complete" || k == "fail") && i != len(s.Steps)-1 {
		return fmt.Errorf("%s ends the task, so no step may follow it", k)
	}
	switch {
	case st.Tool != nil:
		return checkTool(st.Tool)
	case st.Verdict != nil:
		return checkVerdict(st.Verdict)
	case st.Fail != nil:
		if st.Fail.Reason == "" {
			return errors.New("fail needs a reason")
		}
	}
	return nil
}

func checkTool(t *Tool) error {
	if t.Name == "" {
		return errors.New("tool needs a name")
	}
	switch t.Wait {
	case "", "interactive", "durable":
	default:
		return fmt.Errorf("tool wait %q: want interactive or durable", t.Wait)
	}
	switch t.OnReject {
	case "", "continue", "fail":
	default:
		return fmt.Errorf("tool on_reject %q: want continue or fail", t.OnReject)
	}
	var err error
	switch {
	case t.Args != nil && t.ArgsJSON != "":
		return errors.New("tool has both args and args_json; give one")
	case t.ArgsJSON != "":
		t.args = t.ArgsJSON
	case t.Args == nil:
		t.args = "{}"
	default:
		// As a model writes them: no HTML escaping ("<" stays "<", not \u003c).
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(t.Args); err != nil {
			return fmt.Errorf("tool args: %w", err)
		}
		t.args = strings.TrimSuffix(b.String(), "\n")
	}
	if t.result, err = value(t.Result); err != nil {
		return fmt.Errorf("tool result: %w", err)
	}
	if t.Annotations != nil {
		b, err := json.Marshal(t.Annotations)
		if err != nil {
			return fmt.Errorf("tool annotations: %w", err)
		}
		t.annotations = &agentplanev1.McpToolAnnotations{}
		if err := protojson.Unmarshal(b, t.annotations); err != nil {
			return fmt.Errorf("tool annotations: %w", err)
		}
	}
	return nil
}

func checkVerdict(v *Verdict) error {
	if v.Verdict == "" {
		return errors.New("verdict needs a verdict (pass, fail or needs_revision)")
	}
	for j, r := range v.Resolved {
		if (r.ID == "") == (r.Text == "") {
			return fmt.Errorf("verdict resolved[%d]: name the obligation by id or by text, not both", j)
		}
		if r.How != "addressed" && r.How != "withdrawn" {
			return fmt.Errorf("verdict resolved[%d]: how %q: want addressed or withdrawn", j, r.How)
		}
	}
	if len(v.Scores) > 0 {
		v.scores = make(map[string]*structpb.Value, len(v.Scores))
		for k, raw := range v.Scores {
			pv, err := value(raw)
			if err != nil {
				return fmt.Errorf("verdict scores.%s: %w", k, err)
			}
			v.scores[k] = pv
		}
	}
	return nil
}

// value converts a decoded YAML value to a protobuf Value; nil stays nil.
func value(v any) (*structpb.Value, error) {
	if v == nil {
		return nil, nil
	}
	return structpb.NewValue(v)
}

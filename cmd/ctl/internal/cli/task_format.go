package cli

// Helpers that turn API values into short human text, shared by the task, hitl,
// admin and bench commands.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// enumName turns TASK_STATE_INPUT_REQUIRED into input_required.
func enumName(v fmt.Stringer, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(v.String(), prefix))
}

func stateName(s agentplanev1.TaskState) string { return enumName(s, "TASK_STATE_") }

// parseEnum maps a user's spelling (input_required, INPUT-REQUIRED,
// TASK_STATE_INPUT_REQUIRED) to an enum value; values maps full names to numbers.
func parseEnum(s, prefix string, values map[string]int32) (int32, bool) {
	name := strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "-", "_"))
	if !strings.HasPrefix(name, prefix) {
		name = prefix + name
	}
	v, ok := values[name]
	return v, ok && v != 0
}

// enumChoices lists the user spellings of an enum, for error messages.
func enumChoices(prefix string, values map[string]int32) string {
	var names []string
	for name, v := range values {
		if v != 0 {
			names = append(names, strings.ToLower(strings.TrimPrefix(name, prefix)))
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// parseLabels parses repeated k=v flags.
func parseLabels(flag string, kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErr("--%s %q: want key=value", flag, kv)
		}
		m[k] = v
	}
	return m, nil
}

func labelsText(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	return strings.Join(sortedPairs(m), ",")
}

// sortedPairs renders a map as key=value strings in key order.
func sortedPairs(m map[string]string) []string {
	pairs := make([]string, 0, len(m))
	for k, v := range m {
		pairs = append(pairs, k+"="+v)
	}
	sort.Strings(pairs)
	return pairs
}

// when formats a timestamp in local time; "-" when unset.
func when(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "-"
	}
	return ts.AsTime().Local().Format("2006-01-02 15:04:05")
}

// age is how long ago ts was, rounded for reading ("3m12s", "2h5m", "4d").
func age(ts *timestamppb.Timestamp, now time.Time) string {
	if ts == nil {
		return "-"
	}
	d := max(now.Sub(ts.AsTime()), 0)
	switch {
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// truncate shortens s to n runes, marking the cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// compactJSON renders a protobuf Value as compact JSON with sorted keys (protojson's
// output is deliberately unstable, which is wrong for people and golden files).
func compactJSON(v *structpb.Value) string {
	if v == nil {
		return "null"
	}
	b, err := json.Marshal(v.AsInterface())
	if err != nil {
		return "?"
	}
	return string(b)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

// readJSONOrYAML reads a file holding a protobuf message as JSON or YAML (YAML is
// converted to JSON, then decoded with protojson, so both use the API's field names).
func readJSONOrYAML(path string, m proto.Message) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return usageErr("%v", err)
	}
	if ext := strings.ToLower(filepath.Ext(path)); ext != ".json" {
		if b, err = yaml.YAMLToJSON(b); err != nil {
			return usageErr("%s: %v", path, err)
		}
	}
	if err := protojson.Unmarshal(b, m); err != nil {
		return usageErr("%s: %v", path, err)
	}
	return nil
}

// documentFormat is the DocumentFormat for a spec file, from its extension.
func documentFormat(path string) agentplanev1.DocumentFormat {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return agentplanev1.DocumentFormat_DOCUMENT_FORMAT_JSON
	case ".yaml", ".yml":
		return agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML
	}
	return agentplanev1.DocumentFormat_DOCUMENT_FORMAT_UNSPECIFIED
}

// messageSummary is a message's content on one line: its text parts, and a
// placeholder for each data or file part.
func messageSummary(m *agentplanev1.Message) string {
	var parts []string
	for _, p := range m.GetParts() {
		switch k := p.GetKind().(type) {
		case *agentplanev1.Part_Text:
			parts = append(parts, k.Text)
		case *agentplanev1.Part_Data:
			parts = append(parts, "[data "+compactJSON(structpb.NewStructValue(k.Data.GetData()))+"]")
		case *agentplanev1.Part_File:
			parts = append(parts, "[file "+orDash(k.File.GetName())+" "+k.File.GetMediaType()+"]")
		}
	}
	return strings.Join(parts, " ")
}

// usageText is a message's token usage, for a watch line; "" when it has none.
func usageText(u *agentplanev1.TokenUsage) string {
	if u == nil {
		return ""
	}
	return fmt.Sprintf(" [tokens in %d, out %d]", u.GetInputTokens(), u.GetOutputTokens())
}

// argsText is a call's arguments_json on one line: compacted when it is valid JSON,
// as written (marked) when it is not, "-" when there are none.
func argsText(s string) string {
	if s == "" {
		return "-"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return s + " (not valid JSON)"
	}
	return b.String()
}

// argsIndented is argsText for reading, indented.
func argsIndented(s string) string {
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(s), "", "  "); err != nil {
		return s + "\n(not valid JSON)"
	}
	return b.String()
}

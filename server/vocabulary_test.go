package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/gates"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/tasks"
)

// documentedValues returns the `backticked` values in the comment above
// `string <field> = N;` of message msg in a proto file of the API.
func documentedValues(t *testing.T, file, msg, field string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "proto", "agentplane", "v1", file))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	start := slices.Index(lines, "message "+msg+" {")
	if start < 0 {
		t.Fatalf("%s: no message %s", file, msg)
	}
	fieldRE := regexp.MustCompile(`^\s*string ` + field + ` = \d+;`)
	for i := start + 1; i < len(lines) && lines[i] != "}"; i++ {
		if !fieldRE.MatchString(lines[i]) {
			continue
		}
		var comment []string
		for j := i - 1; j > start && strings.HasPrefix(strings.TrimSpace(lines[j]), "//"); j-- {
			comment = append([]string{lines[j]}, comment...)
		}
		var out []string
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(strings.Join(comment, " "), -1) {
			out = append(out, m[1])
		}
		return out
	}
	t.Fatalf("%s: message %s has no string field %s", file, msg, field)
	return nil
}

func strs[S ~string](in []S) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = string(s)
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// TestReasonVocabulariesAreDeclared: the reason strings the server writes into events
// are closed sets the proto documents on the field; each documented list is exactly
// the server's set (TaskFailure.reason is open to runtimes: the server's own values
// must be among the documented ones).
func TestReasonVocabulariesAreDeclared(t *testing.T) {
	for _, c := range []struct {
		file, msg, field string
		server           []string
	}{
		{"hitl.proto", "ToolGated", "reason", append(slices.Clone(hitl.GateReasons), gates.AlwaysGatedReasons...)},
		{"task.proto", "StateChanged", "reason", tasks.StateReasons},
		{"task.proto", "DroppedEntry", "reason", strs(gates.DropReasons)},
		{"task.proto", "InjectionIgnored", "reason", strs(gates.IgnoreReasons)},
	} {
		if doc := documentedValues(t, c.file, c.msg, c.field); !sameSet(doc, c.server) {
			t.Errorf("%s.%s documents %v; the server writes %v", c.msg, c.field, doc, c.server)
		}
	}
	doc := documentedValues(t, "task.proto", "TaskFailure", "reason")
	for _, r := range tasks.FailureReasons {
		if !slices.Contains(doc, r) {
			t.Errorf("TaskFailure.reason does not document %q", r)
		}
	}
}

// TestStateReasonsAreConstants: every StateChanged reason the server writes comes
// from tasks.StateReasons (or is a failure reason): no call of SetState or Resume
// passes a string literal, which would slip past TestReasonVocabulariesAreDeclared.
func TestStateReasonsAreConstants(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "SetState" && sel.Sel.Name != "Resume") || len(call.Args) == 0 {
				return true
			}
			if lit, ok := call.Args[len(call.Args)-1].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				t.Errorf("%s: %s(%s): use a tasks.State* constant", fset.Position(call.Pos()), sel.Sel.Name, lit.Value)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

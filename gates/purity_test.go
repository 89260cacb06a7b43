package gates

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestImportsArePure keeps the package below everything else: it may import the
// standard library and the generated API, nothing else (no I/O helpers, no logging
// frameworks, nothing of ours above gen).
func TestImportsArePure(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := map[string]bool{"os": true, "io": true, "io/fs": true, "net/http": true, "log": true, "log/slog": true, "time": true, "math/rand": true, "math/rand/v2": true, "crypto/rand": true, "os/exec": true, "syscall": true, "unsafe": true}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			stdlib := !strings.Contains(first, ".")
			switch {
			case path == "github.com/agentplane/agentplane/gen/agentplane/v1":
			case stdlib && !forbidden[path]:
			default:
				t.Errorf("%s imports %s: gates may import only the standard library (no I/O, clock or logging) and gen", name, path)
			}
		}
	}
}

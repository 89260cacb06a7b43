package layering

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/agentplane/agentplane"

// rank places a package in the layering; a package may import only packages of a
// lower rank, or of its own rank where sameRankOK says so.
func rank(pkg string) (int, bool) {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	switch {
	case rel == "internal/testutil":
		return 0, false // tests' shared helpers: a leaf any test may import
	case strings.HasPrefix(rel, "gen/") || strings.HasPrefix(rel, "api/"):
		return 0, true // the published API: generated code and api/reasons, which reads it
	case rel == "gates" || strings.HasPrefix(rel, "gates/"):
		return 1, false // pure decisions: below everything but gen, so config can validate with them
	case rel == "server/apierr" || rel == "server/config":
		return 2, false
	case strings.HasPrefix(rel, "server/store"):
		return 3, true
	case rel == "client" || strings.HasPrefix(rel, "client/"):
		return 4, true
	case rel == "server/servertest":
		return 6, false
	case rel == "server":
		return 5, false
	case strings.HasPrefix(rel, "server/"):
		return 4, true // domain packages: spec, tasks, hitl, auth, ...
	case strings.HasPrefix(rel, "cmd/") || strings.HasPrefix(rel, "tools/") || strings.HasPrefix(rel, "sdk/"): // binaries; tools/ measure them, sdk/ drives the SDKs (the conformance driver)
		return 7, true
	case strings.HasPrefix(rel, "internal/") || strings.HasPrefix(rel, "tools/") || rel == "sdk":
		return 8, true // checks and developer tools, above everything; sdk runs the other languages' suites
	}
	return -1, false
}

// extra forbids edges the ranks allow but the design does not.
func forbidden(from, to string) string {
	rel := func(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, module), "/") }
	f, t := rel(from), rel(to)
	switch {
	case (f == "gates" || strings.HasPrefix(f, "gates/")) && !strings.HasPrefix(t, "gen/") && !strings.HasPrefix(t, "gates"):
		return "gates is pure: it may import only gen"
	case (f == "client" || strings.HasPrefix(f, "client/")) && (t == "server" || strings.HasPrefix(t, "server/")):
		return "the client (the Go SDK) must not depend on the server: it reads errors with api/reasons"
	case (f == "api" || strings.HasPrefix(f, "api/")) && !strings.HasPrefix(t, "gen/agentplane/v1"):
		return "api/ is the published API: it may import only gen/agentplane/v1"
	case strings.HasPrefix(f, "server/") && f != "server/servertest" && (t == "client" || strings.HasPrefix(t, "client/")):
		return "domain packages must not call the API through the client"
	}
	return ""
}

type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

func TestImportsFlowOneWay(t *testing.T) {
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(out)
	checked := 0
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		from, sameOK := rank(p.ImportPath)
		if from < 0 {
			t.Errorf("package %s has no place in the layering; add it to rank()", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			checked++
			to, _ := rank(imp)
			if to > from || (to == from && !sameOK && imp != p.ImportPath) {
				t.Errorf("%s imports %s: imports must flow cmd -> server -> domain/gates -> store -> gen", p.ImportPath, imp)
			}
			if why := forbidden(p.ImportPath, imp); why != "" {
				t.Errorf("%s imports %s: %s", p.ImportPath, imp, why)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no internal imports checked; is the module path right?")
	}
}

func TestRanksOrderTheLayers(t *testing.T) {
	order := []string{"gen/agentplane/v1", "gates", "server/apierr", "server/store", "server/tasks", "server", "server/servertest", "cmd/ctl"}
	prev := -1
	for _, p := range order {
		r, _ := rank(module + "/" + p)
		if r < prev {
			t.Fatalf("%s ranks below the layer before it", p)
		}
		prev = r
	}
}

// TestCtlDoesNotLinkTheServer: ctl links the server's leaf packages it shares rules
// with (apierr, config, spec, version: spec validate --offline runs the server's own
// validator on the server's own config loader), never the server itself, its store or
// its domain packages.
func TestCtlDoesNotLinkTheServer(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./cmd/ctl")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"server/apierr": true, "server/config": true, "server/spec": true, "server/version": true}
	linked := 0
	for _, pkg := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(pkg, module+"/")
		if !ok || (rel != "server" && !strings.HasPrefix(rel, "server/")) {
			continue
		}
		linked++
		if !allowed[rel] {
			t.Errorf("cmd/ctl links %s", pkg)
		}
	}
	if linked == 0 {
		t.Fatal("cmd/ctl links no server package at all; is the module path right?")
	}
}

// TestPublishedProtosAreTheAPIOnly: proto/ is what clients generate from and what
// api/image.binpb holds, so it declares package agentplane.v1 only; the store's
// on-disk messages live in server/store/proto.
func TestPublishedProtosAreTheAPIOnly(t *testing.T) {
	files, err := filepath.Glob("../../proto/*/*/*.proto")
	if err != nil || len(files) == 0 {
		t.Fatalf("no protos under proto/ (%v)", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), "\npackage agentplane.v1;\n") {
			t.Errorf("%s is in the published module but is not package agentplane.v1", f)
		}
	}
	if all, _ := filepath.Glob("../../proto/*/*/*/*.proto"); len(all) > 0 {
		t.Errorf("protos nested deeper than proto/agentplane/v1: %v", all)
	}
}

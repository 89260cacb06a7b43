//go:build unix

package sdk_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// skipEnv opts out of a language's suite explicitly: a comma-separated list of ts, py
// (or all). Without it a missing toolchain fails the test, so that the README's test
// command never passes while an SDK went untested.
const skipEnv = "AGENTPLANE_SKIP_SDK_TESTS"

// python is Debian's interpreter, where python3-grpcio and python3-protobuf install
// (a pyenv python3 earlier on PATH usually lacks grpc).
const python = "/usr/bin/python3"

// TestSDKs runs the TypeScript and the Python SDKs' own suites (node:test and
// unittest) against a control plane built from this tree. Both suites start that
// binary themselves, restart it mid-watch, run their workers and examples, and the
// TypeScript suite drives the Python example runtime across languages.
//
// go test caches a passing result and replays it while the files the test opened are
// unchanged. The suites run in child processes, whose reads go test does not see, so
// the test opens every source file they depend on itself (trackInputs): the SDKs'
// sources, tests and generated code, the examples, and every Go file the control
// plane is built from.
func TestSDKs(t *testing.T) {
	skip := skipped(t)
	if skip["ts"] && skip["py"] {
		t.Skipf("%s=%s: the TypeScript and Python SDK suites were NOT run", skipEnv, os.Getenv(skipEnv))
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildControlPlane(t, root)

	// The two suites share nothing but the binary: run them side by side.
	t.Run("typescript", func(t *testing.T) {
		t.Parallel()
		if skip["ts"] {
			t.Skipf("!!! %s: the TypeScript SDK suite (sdk/typescript) was NOT run", skipEnv)
		}
		testTypeScript(t, root, bin, skip["py"])
	})
	t.Run("python", func(t *testing.T) {
		t.Parallel()
		if skip["py"] {
			t.Skipf("!!! %s: the Python SDK suite (sdk/python) was NOT run", skipEnv)
		}
		testPython(t, root, bin)
	})
	t.Run("python-package", func(t *testing.T) {
		t.Parallel()
		if skip["py"] {
			t.Skipf("!!! %s: the Python SDK's wheel and sdist were NOT built nor installed", skipEnv)
		}
		trackInputs(t, root, "sdk/python/README.md", "sdk/python/MANIFEST.in", "sdk/python/gen_services.py")
		testPythonPackage(t, root, bin)
	})
}

func skipped(t *testing.T) map[string]bool {
	skip := map[string]bool{}
	for _, s := range strings.Split(os.Getenv(skipEnv), ",") {
		switch s = strings.TrimSpace(s); s {
		case "":
		case "all":
			skip["ts"], skip["py"] = true, true
		case "ts", "py":
			skip[s] = true
		default:
			t.Fatalf("%s=%q: %q is not one of ts, py, all", skipEnv, os.Getenv(skipEnv), s)
		}
	}
	return skip
}

func testTypeScript(t *testing.T, root, bin string, pySkipped bool) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("!!! %s not found: the TypeScript SDK (sdk/typescript) cannot be tested. Install Node.js 20+ "+
				"(with npm; scripts/test runs `npm ci`, for which the npm registry must be reachable once), or set %s=ts to skip it on purpose", tool, skipEnv)
		}
	}
	sdk := filepath.Join(root, "sdk", "typescript")
	example := filepath.Join(root, "examples", "typescript")
	trackInputs(t, root,
		"sdk/typescript/src", "sdk/typescript/test", "sdk/typescript/gen", "sdk/typescript/proto",
		"sdk/typescript/package.json", "sdk/typescript/package-lock.json", "sdk/typescript/tsconfig.json",
		"examples/typescript/approve.ts", "examples/typescript/package.json",
		"examples/typescript/package-lock.json", "examples/typescript/tsconfig.json",
		"examples/python-runtime", "sdk/python/src")

	requireNodeModules(t, sdk)
	requireNodeModules(t, example)
	run(t, sdk, nil, "npm", "run", "build")
	// The example depends on the SDK built above (file:../../sdk/typescript); the suite runs it.
	run(t, example, nil, "npm", "run", "build")
	// The package as a user gets it: packed, installed offline into a clean directory, the
	// example compiled and run against it.
	t.Run("package", func(t *testing.T) { testTypeScriptPackage(t, root, bin) })

	env := []string{"AGENTPLANE_BIN=" + bin, "AGENTPLANE_SDK_STRICT=1", "PYTHONDONTWRITEBYTECODE=1"}
	// --ignore-scripts: the build above is the pretest script's; the test script still runs.
	out := run(t, sdk, env, "npm", "test", "--ignore-scripts")
	pass, fail, skip := tapCount(out, "pass"), tapCount(out, "fail"), tapCount(out, "skipped")
	if pass <= 0 || fail != 0 {
		t.Fatalf("npm test: %d passed, %d failed:\n%s", pass, fail, tail(out))
	}
	if skip > 0 && !pySkipped {
		t.Fatalf("npm test: %d test(s) skipped (only the cross-language one may be, with %s=py):\n%s", skip, skipEnv, tail(out))
	}
	t.Logf("TypeScript SDK: %d tests passed, %d skipped", pass, skip)
}

func testPython(t *testing.T, root, bin string) {
	if err := exec.Command(python, "-c", "import grpc, google.protobuf").Run(); err != nil {
		t.Fatalf("!!! %s cannot import grpc and google.protobuf (%v): the Python SDK (sdk/python) cannot be tested. "+
			"Install Debian's python3-grpcio and python3-protobuf (the README's test command, scripts/test, does it), or set %s=py to skip it on purpose",
			python, err, skipEnv)
	}
	trackInputs(t, root, "sdk/python/src", "sdk/python/tests", "sdk/python/proto", "sdk/python/ci.sh",
		"sdk/python/pyproject.toml", "sdk/python/pyrightconfig.json", "sdk/python/package.json",
		"sdk/python/package-lock.json", "examples/python-runtime")
	// pyright, which `sdk/python/ci.sh test` runs first (pyright --strict).
	requireNodeModules(t, filepath.Join(root, "sdk", "python"))
	out := run(t, root, []string{"AGENTPLANE_BIN=" + bin, "PYTHONDONTWRITEBYTECODE=1"}, "bash", "sdk/python/ci.sh", "test")
	m := regexp.MustCompile(`(?m)^Ran (\d+) tests? in`).FindStringSubmatch(out)
	if m == nil || !regexp.MustCompile(`(?m)^OK`).MatchString(out) {
		t.Fatalf("the Python suite did not report OK:\n%s", tail(out))
	}
	t.Logf("Python SDK: %s tests passed", m[1])
}

// buildControlPlane builds ./cmd/controlplane and opens the Go files it is built from.
func buildControlPlane(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "controlplane")
	run(t, root, nil, "go", "build", "-o", bin, "./cmd/controlplane")
	out := run(t, root, nil, "go", "list", "-deps",
		"-f", `{{if not .Standard}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`,
		"./cmd/controlplane")
	files := []string{"go.mod", "go.sum"}
	for _, f := range strings.Fields(out) {
		if rel, err := filepath.Rel(root, f); err == nil && !strings.HasPrefix(rel, "..") {
			files = append(files, rel) // dependencies outside the tree are pinned by go.sum
		}
	}
	trackInputs(t, root, files...)
	return bin
}

// trackInputs opens each file, and walks each directory opening every file in it, so
// that go test's cache sees them (it records what a test opens, by size and mtime, and
// a directory by its listing). Build outputs are left out: they change on every run.
func trackInputs(t *testing.T, root string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		err := filepath.WalkDir(filepath.Join(root, p), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				switch d.Name() {
				case "node_modules", "dist", "__pycache__", "build":
					return filepath.SkipDir
				}
				return nil
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			return f.Close()
		})
		if err != nil {
			t.Fatalf("reading the SDK sources: %v", err)
		}
	}
}

// requireNodeModules fails the test when dir's node_modules are absent or older than its
// lockfile. The README's test command, scripts/test, installs them (npm ci) before go test.
func requireNodeModules(t *testing.T, dir string) {
	t.Helper()
	lang, suite := "ts", "the TypeScript suite"
	if filepath.Base(dir) == "python" {
		lang, suite = "py", "the Python suite (whose type check, pyright, is an npm package)"
	}
	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	installed, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err != nil || installed.ModTime().Before(lock.ModTime()) {
		t.Fatalf("!!! %s: node_modules are absent or older than package-lock.json. Run the tests with scripts/test, "+
			"which installs them, or `npm ci` there; or set %s=%s to skip %s on purpose", dir, skipEnv, lang, suite)
	}
}

// run runs a command in dir with env added, in its own process group, and returns its
// output; a failure fails the test with the output's tail. The group (the suite and the
// control planes it starts) gets SIGTERM before the test's deadline, and when the test
// itself gets SIGINT (Ctrl-C) or SIGTERM, so that nothing outlives the test.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-30*time.Second))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (stopped: the test was interrupted or reached its deadline)", err)
		}
		t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, tail(out.String()))
	}
	return out.String()
}

// tapCount reads a node:test summary line ("# pass 21"); -1 when absent.
func tapCount(out, what string) int {
	m := regexp.MustCompile(`(?m)^# ` + what + ` (\d+)$`).FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// tail is the end of a long output, where the failures and summaries are.
func tail(out string) string {
	lines := strings.Split(out, "\n")
	if len(lines) > 300 {
		lines = append([]string{fmt.Sprintf("... (%d lines before)", len(lines)-300)}, lines[len(lines)-300:]...)
	}
	return strings.Join(lines, "\n")
}

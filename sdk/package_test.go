//go:build unix

package sdk_test

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// testPythonPackage builds the Python SDK's sdist and wheel offline (build --no-isolation,
// Debian's setuptools; the wheel is built from the sdist, so the sdist is complete),
// checks what an index would show (the metadata) and what the wheel carries (py.typed,
// the stubs, the descriptors), installs the wheel into a clean venv whose grpcio and
// protobuf come from Debian (--system-site-packages, no index), checks the venv imports
// agentplane from its own site-packages, and runs examples/python-runtime there through
// an approval (sdk/python/tests/test_example.py, with that interpreter).
func testPythonPackage(t *testing.T, root, bin string) {
	if err := exec.Command(python, "-c", "import build, setuptools, wheel, venv, ensurepip").Run(); err != nil {
		t.Fatalf("!!! %s cannot import build, setuptools, wheel, venv and ensurepip (%v): the wheel cannot be built and installed. "+
			"Install Debian's python3-build python3-setuptools python3-wheel python3-venv (sdk/python/ci.sh deps, which scripts/test runs), "+
			"or set %s=py to skip the Python SDK on purpose", python, err, skipEnv)
	}
	tmp := t.TempDir()
	// A copy: the build writes egg-info and build/ next to the sources.
	src := filepath.Join(tmp, "src")
	copyTree(t, filepath.Join(root, "sdk", "python"), src, "node_modules", "build", "dist", "__pycache__")
	dist := filepath.Join(tmp, "dist")
	run(t, tmp, []string{"PYTHONDONTWRITEBYTECODE=1"}, python, "-m", "build", "--no-isolation", "--outdir", dist, src)
	wheel, sdist := only(t, dist, ".whl"), only(t, dist, ".tar.gz")

	files, metadata := wheelContents(t, wheel)
	for _, f := range []string{"agentplane/py.typed", "agentplane/v1/task_pb2.pyi", "agentplane/v1/task_service_pb2.pyi",
		"agentplane/_rpc/google_rpc.binpb", "agentplane/_services.py", "agentplane/enums.py", "agentplane/async_worker.py"} {
		if !files[f] {
			t.Errorf("the wheel lacks %s", f)
		}
	}
	for _, want := range []string{
		`(?m)^Name: agentplane$`, `(?m)^Requires-Python: >=3\.11$`,
		`(?m)^Requires-Dist: grpcio \(<2,>=1\.51\.1\)$`, `(?m)^Requires-Dist: protobuf \(<6,>=4\.21\.12\)$`,
		`(?m)^Project-URL: Homepage, https://`, `(?m)^Project-URL: Documentation, https://`, `(?m)^Project-URL: Source, https://`,
		`(?m)^Classifier: Typing :: Typed$`, `(?m)^Classifier: Framework :: AsyncIO$`, `(?m)^License: Apache-2\.0$`,
		`(?m)^Description-Content-Type: text/markdown$`, `(?m)^# agentplane for Python$`,
	} {
		if !regexp.MustCompile(want).MatchString(metadata) {
			t.Errorf("the wheel's METADATA does not match %s:\n%s", want, metadata[:min(len(metadata), 2000)])
		}
	}
	sfiles := tarContents(t, sdist)
	for _, f := range []string{"README.md", "pyproject.toml", "src/agentplane/py.typed", "src/agentplane/v1/task_pb2.pyi",
		"src/agentplane/_rpc/google_rpc.binpb", "proto/google/rpc/status.proto"} {
		if !sfiles["agentplane-0.1.0/"+f] {
			t.Errorf("the sdist lacks %s", f)
		}
	}

	venv := filepath.Join(tmp, "venv")
	run(t, tmp, nil, python, "-m", "venv", "--system-site-packages", venv)
	vpy := filepath.Join(venv, "bin", "python")
	// No index: grpcio and protobuf must be satisfied by Debian's, within the declared ranges.
	run(t, tmp, cleanPython, vpy, "-m", "pip", "install", "--no-index", "--disable-pip-version-check", "--no-cache-dir", wheel)
	where := strings.TrimSpace(run(t, tmp, cleanPython, vpy, "-c", "import agentplane; print(agentplane.__file__)"))
	if !strings.HasPrefix(where, venv+string(os.PathSeparator)) {
		t.Fatalf("the venv imports agentplane from %s, not from its own site-packages (%s)", where, venv)
	}
	typeCheckInstalled(t, root, tmp, vpy)
	out := run(t, filepath.Join(root, "sdk", "python", "tests"), append([]string{"AGENTPLANE_BIN=" + bin,
		"AGENTPLANE_EXAMPLE_PYTHON=" + vpy, "AGENTPLANE_EXAMPLE_SDK_UNDER=" + venv}, cleanPython...),
		python, "-m", "unittest", "-v", "test_example")
	if !regexp.MustCompile(`(?m)^OK`).MatchString(out) {
		t.Fatalf("the example did not run from the installed wheel:\n%s", tail(out))
	}
	t.Logf("Python package: %s and %s built offline; the example ran from a venv with the wheel (%s)",
		filepath.Base(sdist), filepath.Base(wheel), where)
}

// typeCheckInstalled runs pyright over a user's program against the installed wheel: the
// service clients, messages and enums must be typed from it (py.typed, the stubs), so a
// misspelt field of a response is an error and nothing else is.
func typeCheckInstalled(t *testing.T, root, tmp, vpy string) {
	t.Helper()
	dir := filepath.Join(tmp, "user")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	prog := `from agentplane import Client, enum_of
from agentplane.aio import AsyncClient
from agentplane.enums import TaskState
from agentplane.v1 import task_pb2


def started(c: Client) -> task_pb2.Task:
    return c.tasks.start_task(agent_id="echo").task


async def state(c: AsyncClient, task_id: str) -> TaskState:
    return TaskState((await c.tasks.get_task(task_id=task_id)).task.state)


def wrong(c: Client) -> None:
    print(c.tasks.get_task(task_id="t").task.no_such_field)
    print(enum_of(started(c), "state"))
`
	if err := os.WriteFile(filepath.Join(dir, "user.py"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	pyright := filepath.Join(root, "sdk", "python", "node_modules", ".bin", "pyright")
	out, _ := runErr(dir, nil, pyright, "--pythonpath", vpy, "--outputjson", "user.py") // exits 1: one error wanted
	var report struct {
		Diagnostics []struct {
			Severity string `json:"severity"`
			Message  string `json:"message"`
			Rule     string `json:"rule"`
			Range    struct {
				Start struct{ Line int } `json:"start"`
			} `json:"range"`
		} `json:"generalDiagnostics"`
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("pyright over a program using the installed wheel: %v\n%s", err, tail(out))
	}
	var errs []string
	for _, d := range report.Diagnostics {
		if d.Severity == "error" {
			errs = append(errs, fmt.Sprintf("line %d: %s (%s)", d.Range.Start.Line+1, d.Message, d.Rule))
		}
	}
	if len(errs) != 1 || !strings.HasPrefix(errs[0], "line 16: ") || !strings.Contains(errs[0], "no_such_field") {
		t.Fatalf("pyright over a program using the installed wheel: want one error, the misspelt field on line 16; got %q", errs)
	}
}

// cleanPython keeps the caller's Python settings out of a venv's run.
var cleanPython = []string{"PYTHONPATH=", "PYTHONHOME=", "PYTHONNOUSERSITE=1", "PYTHONDONTWRITEBYTECODE=1"}

// testTypeScriptPackage packs the built TypeScript SDK (npm pack), installs the tarball
// into a clean directory offline (npm ci --offline, from the cache that scripts/test's
// npm ci in sdk/typescript filled, with a lockfile made from sdk/typescript's for the
// tarball's dependencies), compiles examples/typescript/approve.ts there against the
// installed package and runs it against a control plane through an approval.
func testTypeScriptPackage(t *testing.T, root, bin string) {
	tmp := t.TempDir()
	sdk := filepath.Join(root, "sdk", "typescript")
	run(t, sdk, nil, "npm", "pack", "--ignore-scripts", "--silent", "--pack-destination", tmp)
	tgz := only(t, tmp, ".tgz")
	files := tarContents(t, tgz)
	for _, f := range []string{"package.json", "dist/src/index.js", "dist/src/index.d.ts", "dist/src/worker.js",
		"dist/src/worker.d.ts"} {
		if !files["package/"+f] {
			t.Errorf("the npm package lacks %s", f)
		}
	}

	app := filepath.Join(tmp, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	writePackLock(t, sdk, tgz, app)
	for _, f := range []string{"approve.ts", "tsconfig.json"} {
		copyFile(t, filepath.Join(root, "examples", "typescript", f), filepath.Join(app, f))
	}
	out, err := runErr(app, nil, "npm", "ci", "--offline", "--no-audit", "--no-fund", "--loglevel=error")
	if err != nil {
		t.Fatalf("npm ci --offline of the packed SDK failed (%v): its dependencies must be in npm's cache, which "+
			"`npm ci` in sdk/typescript fills (scripts/test runs it):\n%s", err, tail(out))
	}
	if fi, err := os.Lstat(filepath.Join(app, "node_modules", "@agentplane", "sdk")); err != nil || !fi.IsDir() {
		t.Fatalf("@agentplane/sdk is not installed as a directory of its own in %s (%v)", app, err)
	}
	run(t, app, nil, filepath.Join("node_modules", ".bin", "tsc"), "-p", "tsconfig.json")

	addr := startControlPlane(t, bin)
	out = run(t, app, []string{"AGENTPLANE_ADDR=" + addr}, "node", filepath.Join("dist", "approve.js"))
	if !strings.Contains(out, "approved in-") || !regexp.MustCompile(`(?m) is (TASK_STATE_)?COMPLETED$`).MatchString(out) {
		t.Fatalf("the example, built against the packed SDK, did not approve and complete its task:\n%s", tail(out))
	}
	t.Logf("TypeScript package: %s installed offline; examples/typescript/approve.ts compiled and ran against it", filepath.Base(tgz))
}

// writePackLock writes app's package.json and package-lock.json: the tarball as
// @agentplane/sdk, its peers, typescript and @types/node, each other package pinned as
// sdk/typescript's lockfile pins it (version and integrity), so that npm ci needs nothing
// but its cache.
func writePackLock(t *testing.T, sdk, tgz, app string) {
	t.Helper()
	var pkg struct {
		Version          string            `json:"version"`
		License          string            `json:"license"`
		Dependencies     map[string]string `json:"dependencies"`
		PeerDependencies map[string]string `json:"peerDependencies"`
		DevDependencies  map[string]string `json:"devDependencies"`
		Engines          map[string]string `json:"engines"`
	}
	readJSON(t, filepath.Join(sdk, "package.json"), &pkg)
	var lock struct {
		Packages map[string]map[string]any `json:"packages"`
	}
	readJSON(t, filepath.Join(sdk, "package-lock.json"), &lock)
	b, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha512.Sum512(b)
	spec := "file:../" + filepath.Base(tgz)
	deps := map[string]string{"@agentplane/sdk": spec}
	for name, r := range pkg.PeerDependencies {
		deps[name] = r
	}
	dev := map[string]string{"typescript": pkg.DevDependencies["typescript"], "@types/node": pkg.DevDependencies["@types/node"]}
	packages := map[string]any{
		"": map[string]any{"name": "agentplane-pack-check", "dependencies": deps, "devDependencies": dev},
		"node_modules/@agentplane/sdk": map[string]any{
			"version": pkg.Version, "resolved": spec, "integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum[:]),
			"license": pkg.License, "dependencies": pkg.Dependencies, "peerDependencies": pkg.PeerDependencies, "engines": pkg.Engines,
		},
	}
	// The closure of what the tarball and the compiler need, as sdk/typescript's lockfile has it.
	var add func(name string, isDev bool)
	add = func(name string, isDev bool) {
		key := "node_modules/" + name
		if _, done := packages[key]; done {
			return
		}
		entry, ok := lock.Packages[key]
		if !ok {
			t.Fatalf("sdk/typescript/package-lock.json has no %s", key)
		}
		e := map[string]any{}
		for k, v := range entry {
			e[k] = v
		}
		delete(e, "dev")
		if isDev {
			e["dev"] = true
		}
		packages[key] = e
		for _, field := range []string{"dependencies", "peerDependencies"} {
			if m, ok := entry[field].(map[string]any); ok {
				for dep := range m {
					add(dep, isDev)
				}
			}
		}
	}
	for _, m := range []map[string]string{pkg.Dependencies, pkg.PeerDependencies} {
		for name := range m {
			add(name, false)
		}
	}
	for name := range dev {
		add(name, true)
	}
	writeJSON(t, filepath.Join(app, "package.json"), map[string]any{
		"name": "agentplane-pack-check", "private": true, "type": "module", "dependencies": deps, "devDependencies": dev,
	})
	writeJSON(t, filepath.Join(app, "package-lock.json"), map[string]any{
		"name": "agentplane-pack-check", "lockfileVersion": 3, "requires": true, "packages": packages,
	})
}

// startControlPlane runs bin on a free loopback port with a data directory of its own
// until the test ends, and returns its address once it accepts connections.
func startControlPlane(t *testing.T, bin string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--data-dir", t.TempDir(), "--grpc-addr", addr, "--http-addr", "off", "--log-level", "warn")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan struct{})
	go func() { // the startup banner names the store once it listens
		s := bufio.NewScanner(out)
		signaled := false
		for s.Scan() {
			if !signaled && regexp.MustCompile(`^\s+store\s`).MatchString(s.Text()) {
				close(ready)
				signaled = true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		t.Fatalf("the control plane did not start on %s within 60 s", addr)
	}
	return addr
}

func only(t *testing.T, dir, suffix string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil || len(m) != 1 {
		t.Fatalf("want one *%s in %s, found %v (%v)", suffix, dir, m, err)
	}
	return m[0]
}

// wheelContents returns the wheel's file names and its METADATA.
func wheelContents(t *testing.T, path string) (map[string]bool, string) {
	t.Helper()
	z, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	files := map[string]bool{}
	var metadata string
	for _, f := range z.File {
		files[f.Name] = true
		if strings.HasSuffix(f.Name, ".dist-info/METADATA") {
			r, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(io.LimitReader(r, 1<<20))
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			metadata = string(b)
		}
	}
	return files, metadata
}

func tarContents(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		files[strings.TrimPrefix(h.Name, "./")] = true
	}
}

// copyTree copies the regular files under from to to, leaving out directories named in skip
// and egg-info directories.
func copyTree(t *testing.T, from, to string, skip ...string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			for _, s := range skip {
				if d.Name() == s {
					return filepath.SkipDir
				}
			}
			if strings.HasSuffix(d.Name(), ".egg-info") {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		copyFile(t, path, filepath.Join(to, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runErr is run without failing the test (and without its process group): the output and the error.
func runErr(dir string, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	b, err := cmd.CombinedOutput()
	return string(b), err
}

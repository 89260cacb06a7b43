// Command mutate is a small mutation check: it makes plausible bugs (mutants) in the
// non-test Go files of some packages, one at a time, runs each package's tests
// against each, and reports how many the tests caught (killed) and which they did
// not (survivors). It never edits the source tree: each mutant is handed to
// `go test` as a build overlay.
//
//	go run ./tools/mutate [flags] [package dir ...]
//
// Without package dirs it checks server/hitl, server/hitl/approvals, server/tasks
// and server/store/boltstore. See docs/testing.md.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

var defaultPackages = []string{"./server/hitl", "./server/hitl/approvals", "./server/tasks", "./server/store/boltstore"}

type options struct {
	timeout time.Duration
	sample  int
	seed    uint64
	list    bool
	match   string
	short   bool
}

func main() {
	var o options
	flag.DurationVar(&o.timeout, "timeout", 3*time.Minute, "per-mutant limit on a package's tests (a mutant that reaches it counts as killed)")
	flag.IntVar(&o.sample, "sample", 0, "check this many mutants, drawn at random (with -seed), instead of all")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of -sample's draw")
	flag.BoolVar(&o.list, "list", false, "list the mutants and stop")
	flag.StringVar(&o.match, "match", "", "only mutants whose file:line: description contains this")
	flag.BoolVar(&o.short, "short", false, "run the tests with -short")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./tools/mutate [flags] [package dir ...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	pkgs := flag.Args()
	if len(pkgs) == 0 {
		pkgs = defaultPackages
	}
	if err := run(o, pkgs); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

// mutant is one edit of one file: bytes [start, end) become repl.
type mutant struct {
	pkg        string // package dir as given
	file       string // absolute path
	line       int
	start, end int
	repl       string
	desc       string
}

func (m mutant) String() string {
	rel, err := filepath.Rel(mustGetwd(), m.file)
	if err != nil {
		rel = m.file
	}
	return fmt.Sprintf("%s:%d: %s", rel, m.line, m.desc)
}

func mustGetwd() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return wd
}

func run(o options, pkgs []string) error {
	var all []mutant
	for _, pkg := range pkgs {
		files, err := goFiles(pkg)
		if err != nil {
			return err
		}
		for _, f := range files {
			ms, err := mutantsOf(pkg, f)
			if err != nil {
				return err
			}
			all = append(all, ms...)
		}
	}
	if o.match != "" {
		all = slices.DeleteFunc(all, func(m mutant) bool { return !strings.Contains(m.String(), o.match) })
	}
	total := len(all)
	if o.sample > 0 && o.sample < len(all) {
		r := rand.New(rand.NewPCG(o.seed, o.seed))
		r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		all = all[:o.sample]
		slices.SortStableFunc(all, func(a, b mutant) int {
			return strings.Compare(fmt.Sprintf("%s:%08d", a.file, a.start), fmt.Sprintf("%s:%08d", b.file, b.start))
		})
	}
	if o.list {
		for _, m := range all {
			fmt.Println(m)
		}
		fmt.Printf("%d mutants\n", len(all))
		return nil
	}
	fmt.Printf("mutate: %d mutants in %s; checking %d (timeout %s each)\n", total, strings.Join(pkgs, " "), len(all), o.timeout)

	tmp, err := os.MkdirTemp("", "mutate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// The tests must pass unmutated, or no mutant's failure means anything.
	for _, pkg := range pkgs {
		if res, out := test(o, pkg, ""); res != passed {
			return fmt.Errorf("the tests of %s do not pass unmutated (%s):\n%s", pkg, res, out)
		}
	}

	var killed, timedOut, unbuilt int
	var survivors []mutant
	start := time.Now()
	for i, m := range all {
		overlay, err := writeOverlay(tmp, m)
		if err != nil {
			return err
		}
		t0 := time.Now()
		res, _ := test(o, m.pkg, overlay)
		switch res {
		case failed:
			killed++
		case timeout:
			killed++
			timedOut++
		case unbuildable:
			unbuilt++
		case passed:
			survivors = append(survivors, m)
		}
		fmt.Printf("[%d/%d] %-9s %s (%.1fs)\n", i+1, len(all), res, m, time.Since(t0).Seconds())
	}
	viable := len(all) - unbuilt
	fmt.Printf("\nmutate: killed %d/%d (%d by timeout); %d did not build; %s\n", killed, viable, timedOut, unbuilt, time.Since(start).Round(time.Second))
	if len(survivors) > 0 {
		fmt.Println("survivors:")
		for _, m := range survivors {
			fmt.Println("  " + m.String())
		}
	}
	return nil
}

// goFiles lists the non-test Go files a package builds from on this platform.
func goFiles(pkg string) ([]string, error) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}{{range .GoFiles}}\n{{.}}{{end}}", pkg).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("go list %s: %v\n%s", pkg, err, ee.Stderr)
		}
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var files []string
	for _, name := range lines[1:] {
		files = append(files, filepath.Join(lines[0], name))
	}
	return files, nil
}

type result string

const (
	passed      result = "SURVIVED"
	failed      result = "killed"
	timeout     result = "timeout"
	unbuildable result = "no-build"
)

// test runs pkg's tests, with overlay (a go build overlay file) if not "".
func test(o options, pkg, overlay string) (result, string) {
	args := []string{"test", "-count=1", "-timeout", o.timeout.String()}
	if o.short {
		args = append(args, "-short")
	}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	args = append(args, pkg)
	// go test enforces -timeout inside the test binary; the context is a backstop
	// for a build or a binary that does not stop.
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	setProcessGroup(cmd)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	text := out.String()
	switch {
	case err == nil:
		return passed, text
	case ctx.Err() != nil || strings.Contains(text, "panic: test timed out"):
		return timeout, text
	case strings.Contains(text, "[build failed]") || strings.Contains(text, "[setup failed]"):
		return unbuildable, text
	}
	return failed, text
}

// writeOverlay writes m's mutated file and an overlay that substitutes it.
func writeOverlay(dir string, m mutant) (string, error) {
	src, err := os.ReadFile(m.file)
	if err != nil {
		return "", err
	}
	mutated := slices.Concat(src[:m.start], []byte(m.repl), src[m.end:])
	file := filepath.Join(dir, "mutant.go")
	if err := os.WriteFile(file, mutated, 0o600); err != nil {
		return "", err
	}
	js, err := json.Marshal(map[string]map[string]string{"Replace": {m.file: file}})
	if err != nil {
		return "", err
	}
	overlay := filepath.Join(dir, "overlay.json")
	return overlay, os.WriteFile(overlay, js, 0o600)
}

// mutantsOf finds the mutation sites of one file:
//   - a comparison flipped or moved off by its boundary (== !=, < <=, > >=);
//   - && and || swapped;
//   - an if condition negated (one that is not a comparison, which the above covers);
//   - an error return skipped (the if around a return of an error never taken);
//   - an integer constant off by one;
//   - a side effect dropped: a call statement, or an assignment to a field or element.
func mutantsOf(pkg, path string) ([]mutant, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var ms []mutant
	add := func(from, to token.Pos, repl, desc string) {
		ms = append(ms, mutant{pkg: pkg, file: path, line: fset.Position(from).Line,
			start: fset.Position(from).Offset, end: fset.Position(to).Offset, repl: repl, desc: desc})
	}
	text := func(n ast.Node) string {
		return string(src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset])
	}
	flips := map[token.Token][]token.Token{
		token.EQL: {token.NEQ}, token.NEQ: {token.EQL},
		token.LSS: {token.LEQ, token.GEQ}, token.LEQ: {token.LSS, token.GTR},
		token.GTR: {token.GEQ, token.LEQ}, token.GEQ: {token.GTR, token.LSS},
		token.LAND: {token.LOR}, token.LOR: {token.LAND},
	}
	// results tracks the result types of the enclosing functions, innermost last.
	var results []*ast.FieldList
	returnsError := func() bool {
		if len(results) == 0 || results[len(results)-1] == nil {
			return false
		}
		l := results[len(results)-1].List
		id, ok := l[len(l)-1].Type.(*ast.Ident)
		return ok && id.Name == "error"
	}
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GenDecl:
			if n.Tok == token.IMPORT {
				return false
			}
		case *ast.FuncDecl:
			if n.Body == nil {
				return false
			}
			results = append(results, n.Type.Results)
			ast.Inspect(n.Body, visit)
			results = results[:len(results)-1]
			return false
		case *ast.FuncLit:
			results = append(results, n.Type.Results)
			ast.Inspect(n.Body, visit)
			results = results[:len(results)-1]
			return false
		case *ast.BinaryExpr:
			for _, to := range flips[n.Op] {
				add(n.OpPos, n.OpPos+token.Pos(len(n.Op.String())), to.String(), fmt.Sprintf("%s -> %s in %s", n.Op, to, short(text(n))))
			}
		case *ast.IfStmt:
			cond := text(n.Cond)
			switch c := n.Cond.(type) {
			case *ast.BinaryExpr:
				// Comparisons and && || are mutated above.
			case *ast.UnaryExpr:
				if c.Op == token.NOT {
					add(c.Pos(), c.X.Pos(), "", fmt.Sprintf("negated condition %s", short(cond)))
				}
			default:
				add(n.Cond.Pos(), n.Cond.End(), "!("+cond+")", fmt.Sprintf("negated condition %s", short(cond)))
			}
			if returnsError() && endsInErrorReturn(n.Body) {
				add(n.Cond.Pos(), n.Cond.End(), "false", fmt.Sprintf("skipped error return under %s", short(cond)))
			}
		case *ast.BasicLit:
			if n.Kind == token.INT {
				if v, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
					add(n.Pos(), n.End(), strconv.FormatInt(v+1, 10), fmt.Sprintf("constant %s -> %d", n.Value, v+1))
				}
			}
		case *ast.ExprStmt:
			if call, ok := n.X.(*ast.CallExpr); ok && !isPanic(call) {
				add(n.Pos(), n.End(), "", fmt.Sprintf("dropped call %s", short(text(n))))
			}
		case *ast.AssignStmt:
			if n.Tok == token.ASSIGN && len(n.Lhs) == 1 && isFieldOrElem(n.Lhs[0]) {
				add(n.Pos(), n.End(), "", fmt.Sprintf("dropped assignment %s", short(text(n))))
			}
		}
		return true
	}
	ast.Inspect(f, visit)
	return ms, nil
}

// endsInErrorReturn says whether block ends in a return whose last result is not nil.
func endsInErrorReturn(b *ast.BlockStmt) bool {
	if len(b.List) == 0 {
		return false
	}
	r, ok := b.List[len(b.List)-1].(*ast.ReturnStmt)
	if !ok || len(r.Results) == 0 {
		return false
	}
	id, ok := r.Results[len(r.Results)-1].(*ast.Ident)
	return !ok || id.Name != "nil"
}

func isPanic(c *ast.CallExpr) bool {
	id, ok := c.Fun.(*ast.Ident)
	return ok && id.Name == "panic"
}

func isFieldOrElem(e ast.Expr) bool {
	switch e.(type) {
	case *ast.SelectorExpr, *ast.IndexExpr:
		return true
	}
	return false
}

func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

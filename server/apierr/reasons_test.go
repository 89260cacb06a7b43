package apierr

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/agentplane/agentplane/api/reasons"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// buildsStatusForAMapper names the functions that may build a bare status: what they
// build is only handed to a mapper that gives it an ErrorInfo.
var buildsStatusForAMapper = map[string]string{
	"httpRoutingError": "server/http_errors.go: its status goes through httpError",
}

// shorthandCodes are the constructors that fix the code (and, for ResourceExhausted,
// the reason).
var shorthandCodes = map[string]codes.Code{
	"InvalidArgument":    codes.InvalidArgument,
	"NotFound":           codes.NotFound,
	"FailedPrecondition": codes.FailedPrecondition,
	"ResourceExhausted":  codes.ResourceExhausted,
}

// declaredConstants maps the Reason* constants of this package to their enum values,
// read from the source so that a constant of any other value fails to be found.
func declaredConstants(t *testing.T) map[string]Reason {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "apierr.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Reason{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Reason") {
			return true
		}
		sel, ok := vs.Values[0].(*ast.SelectorExpr)
		if !ok {
			t.Errorf("%s is not an agentplanev1.ErrorReason_* value", vs.Names[0].Name)
			return true
		}
		v, ok := agentplanev1.ErrorReason_value[strings.TrimPrefix(sel.Sel.Name, "ErrorReason_")]
		if !ok {
			t.Errorf("%s = %s: not a declared reason", vs.Names[0].Name, sel.Sel.Name)
		}
		out[vs.Names[0].Name] = Reason(v)
		return true
	})
	if len(out) == 0 {
		t.Fatal("found no Reason constants in apierr.go")
	}
	return out
}

// reasonUse is one place the server builds an error: the reason, and the code when
// the call names it.
type reasonUse struct {
	where  string
	reason Reason
	code   codes.Code
	coded  bool
}

// TestEveryReasonIsDeclared walks the server's sources (server/, gates/; tests
// excluded) for every error it can build and checks it against
// proto/agentplane/v1/errors.proto: each reason used is declared, with a code the
// declaration lists, and each declared reason is produced somewhere (docs/errors.md,
// generated from the declaration, lists no reason nobody sends). No server code builds
// a status by hand (status.Error, status.New), which would carry no ErrorInfo.
func TestEveryReasonIsDeclared(t *testing.T) {
	consts := declaredConstants(t)
	var uses []reasonUse
	fset := token.NewFileSet()
	for _, root := range []string{"../../server", "../../gates"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "gen" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "servertest") || strings.Contains(path, "storetest") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			inApierr := f.Name.Name == "apierr"
			// constOf resolves an expression naming a Reason constant.
			constOf := func(e ast.Expr) (Reason, bool) {
				switch x := e.(type) {
				case *ast.SelectorExpr:
					if id, ok := x.X.(*ast.Ident); ok && id.Name == "apierr" {
						r, ok := consts[x.Sel.Name]
						return r, ok
					}
				case *ast.Ident:
					if inApierr {
						r, ok := consts[x.Name]
						return r, ok
					}
				}
				return 0, false
			}
			funcOf := func(call *ast.CallExpr) (pkg, name string) {
				switch fn := call.Fun.(type) {
				case *ast.SelectorExpr:
					if id, ok := fn.X.(*ast.Ident); ok {
						return id.Name, fn.Sel.Name
					}
				case *ast.Ident:
					if inApierr {
						return "apierr", fn.Name
					}
				}
				return "", ""
			}
			codeOf := func(e ast.Expr) (codes.Code, bool) {
				sel, ok := e.(*ast.SelectorExpr)
				if !ok {
					return 0, false
				}
				if id, isID := sel.X.(*ast.Ident); !isID || id.Name != "codes" {
					return 0, false
				}
				for c := codes.OK; c <= codes.Unauthenticated; c++ {
					if c.String() == sel.Sel.Name {
						return c, true
					}
				}
				return 0, false
			}
			fn := ""
			ast.Inspect(f, func(n ast.Node) bool {
				where := func() string { return fset.Position(n.Pos()).String() }
				if d, ok := n.(*ast.FuncDecl); ok {
					fn = d.Name.Name
				}
				switch x := n.(type) {
				case *ast.GenDecl:
					if inApierr && x.Tok == token.CONST {
						return false // the declarations themselves
					}
				case *ast.SelectorExpr, *ast.Ident:
					if r, ok := constOf(x.(ast.Expr)); ok {
						uses = append(uses, reasonUse{where: where(), reason: r})
					}
				case *ast.CallExpr:
					pkg, name := funcOf(x)
					if _, mapped := buildsStatusForAMapper[fn]; !inApierr && !mapped && pkg == "status" && (name == "Error" || name == "Errorf" || name == "New" || name == "Newf") {
						t.Errorf("%s: status.%s builds an error without ErrorInfo; return an *apierr.Error", where(), name)
					}
					if pkg == "agentplanev1" && name == "ErrorReason" {
						t.Errorf("%s: a reason converted from a number; use an apierr.Reason* constant", where())
					}
					if pkg != "apierr" {
						return true
					}
					var codeArg, reasonArg ast.Expr
					switch name {
					case "New":
						codeArg, reasonArg = x.Args[0], x.Args[1]
					case "Wrap":
						codeArg, reasonArg = x.Args[1], x.Args[2]
					case "ResourceExhausted":
						uses = append(uses, reasonUse{where: where(), reason: ReasonResourceExhausted, code: codes.ResourceExhausted, coded: true})
						return true
					default:
						c, ok := shorthandCodes[name]
						if !ok {
							return true
						}
						r, rok := constOf(x.Args[0])
						if !rok {
							t.Errorf("%s: apierr.%s with a reason that is not an apierr.Reason* constant", where(), name)
							return true
						}
						uses = append(uses, reasonUse{where: where(), reason: r, code: c, coded: true})
						return true
					}
					if id, ok := reasonArg.(*ast.Ident); ok && inApierr && id.Name == "reason" {
						return true // a constructor passing its parameter on
					}
					r, rok := constOf(reasonArg)
					c, cok := codeOf(codeArg)
					if !rok {
						t.Errorf("%s: apierr.%s with a reason that is not an apierr.Reason* constant", where(), name)
						return true
					}
					uses = append(uses, reasonUse{where: where(), reason: r, code: c, coded: cok})
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	produced := map[Reason]bool{}
	for _, u := range uses {
		if reasons.Wire(u.reason) == "" {
			t.Errorf("%s: reason %v is not declared in errors.proto", u.where, u.reason)
			continue
		}
		produced[u.reason] = true
		if u.coded && !slices.Contains(reasons.Codes(u.reason), u.code) {
			t.Errorf("%s: %s with code %s; errors.proto declares it with %v", u.where, reasons.Wire(u.reason), u.code, reasons.Codes(u.reason))
		}
	}
	for _, r := range reasons.All() {
		if !produced[r] {
			t.Errorf("%s (%s) is declared in errors.proto but the server never produces it: remove it, or use it", r, reasons.Wire(r))
		}
	}
	for name, r := range consts {
		if !produced[r] {
			t.Errorf("apierr.%s is never used", name)
		}
	}
}

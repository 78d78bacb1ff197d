package architecture

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// clockExceptions are the places below the assembly that may hand out the wall clock as a value, each
// for a reason.
var clockExceptions = map[string]string{
	"videogen/internal/infra/ratelimit.NewLocal": "the in-process limiter on real time, a convenience for tests; the server passes its clock to NewLocalClock",
}

// clockFallbacks finds, in the packages below the assembly, every use of time.Now as a value — not
// called, but stored, returned or passed on — and every use of it at all inside a check that a clock
// (a func() time.Time) is nil: the ways a part falls back to the wall clock when its caller gave none. The clock is given once, by internal/server (or the command line, or a test), and a part
// without one is a mistake to refuse, not to paper over (docs/architecture.md).
// allLayers checks the assembly's packages too (the planted package lives there).
func clockFallbacks(pkgs []*packages.Package, allLayers bool) (found []finding, files int) {
	for _, p := range pkgs {
		if !allLayers && layerOf(p.PkgPath) == assembly {
			continue
		}
		for _, f := range p.Syntax {
			name := p.Fset.Position(f.Pos()).Filename
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			files++
			called := map[ast.Expr]bool{}
			underNilClock := map[ast.Expr]bool{} // time.Now's uses inside `if clock == nil { … }`
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					called[n.Fun] = true
				case *ast.IfStmt:
					if isNilClockCheck(p.TypesInfo, n.Cond) {
						ast.Inspect(n.Body, func(m ast.Node) bool {
							if sel, ok := m.(*ast.SelectorExpr); ok {
								underNilClock[sel] = true
							}
							return true
						})
					}
				}
				return true
			})
			for _, d := range f.Decls {
				where := p.PkgPath
				if fd, ok := d.(*ast.FuncDecl); ok {
					where += "." + fd.Name.Name
				}
				if clockExceptions[where] != "" {
					continue
				}
				ast.Inspect(d, func(n ast.Node) bool {
					sel, ok := n.(*ast.SelectorExpr)
					if !ok || (called[sel] && !underNilClock[sel]) {
						return true
					}
					if fn, ok := p.TypesInfo.Uses[sel.Sel].(*types.Func); ok && fn.Pkg() != nil && fn.Pkg().Path() == "time" && fn.Name() == "Now" {
						found = append(found, finding{pos: p.Fset.Position(sel.Pos()), what: "time.Now used as a value in " + where + ": take the clock from the caller"})
					}
					return true
				})
			}
		}
	}
	return found, files
}

// isNilClockCheck reports whether cond is `x == nil` for a clock x (a func() time.Time).
func isNilClockCheck(info *types.Info, cond ast.Expr) bool {
	b, ok := cond.(*ast.BinaryExpr)
	if !ok || b.Op != token.EQL {
		return false
	}
	for _, pair := range [][2]ast.Expr{{b.X, b.Y}, {b.Y, b.X}} {
		if id, ok := pair[1].(*ast.Ident); !ok || id.Name != "nil" {
			continue
		}
		sig, ok := info.TypeOf(pair[0]).(*types.Signature)
		if ok && sig.Params().Len() == 0 && sig.Results().Len() == 1 && types.TypeString(sig.Results().At(0).Type(), nil) == "time.Time" {
			return true
		}
	}
	return false
}

// TestClockGiven: no part below the assembly falls back to the wall clock; every clock is given.
func TestClockGiven(t *testing.T) {
	found, files := clockFallbacks(load(t, "./..."), false)
	if files < 100 {
		t.Fatalf("only %d files checked: the loader did not see the module", files)
	}
	for _, f := range found {
		t.Error(f)
	}
}

// TestClockGivenCatchesPlantedFallbacks: the fallbacks planted in testdata/clockfallback (marked `// want`)
// are caught on exactly those lines, and the call beside them is not.
func TestClockGivenCatchesPlantedFallbacks(t *testing.T) {
	pkgs := load(t, "./internal/architecture/testdata/clockfallback")
	found, _ := clockFallbacks(pkgs, true)
	want := map[int]bool{}
	for _, f := range pkgs[0].Syntax {
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if c.Text == "// want" {
					want[pkgs[0].Fset.Position(c.Pos()).Line] = true
				}
			}
		}
	}
	if len(want) != 4 {
		t.Fatalf("%d planted fallbacks marked, want 4", len(want))
	}
	got := map[int]bool{}
	for _, f := range found {
		got[f.pos.Line] = true
		if !want[f.pos.Line] {
			t.Errorf("flagged a line not planted: %s", f)
		}
	}
	for line := range want {
		if !got[line] {
			t.Errorf("planted fallback on line %d not caught", line)
		}
	}
}

package web

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEveryRefusalCodeHasAStatus reads the product's source for every refusal code it can make — the
// code of each refusal.New and refusal.Field, each refusal.Error literal, and each string constant or
// return whose name says it is a code (mediafetch's, media's TooManyCode) — and requires a status for
// each in refusalStatus: the domain decides codes, this package alone their statuses, and a code without
// one would answer 500.
func TestEveryRefusalCodeHasAStatus(t *testing.T) {
	codes := map[string]string{} // code → where it is made
	fset := token.NewFileSet()
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		literal := func(e ast.Expr) (string, bool) {
			bl, ok := e.(*ast.BasicLit)
			if !ok || bl.Kind != token.STRING {
				return "", false
			}
			s, err := strconv.Unquote(bl.Value)
			return s, err == nil
		}
		// A provider's own error codes (an upstream adapter's codeAccountOverdue) are not ours to answer
		// with: the upstream adapters make no refusal codes.
		makesRefusals := !strings.Contains(filepath.ToSlash(path), "/internal/domain/upstream/")
		add := func(e ast.Expr) {
			if s, ok := literal(e); ok {
				codes[s] = fset.Position(e.Pos()).String()
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
					if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "refusal" && (sel.Sel.Name == "New" || sel.Sel.Name == "Field") && len(n.Args) > 0 {
						add(n.Args[0])
					}
				}
			case *ast.CompositeLit:
				typ := n.Type
				if sel, ok := typ.(*ast.SelectorExpr); ok && sel.Sel.Name == "Error" {
					if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "refusal" {
						return true
					}
				} else if id, ok := typ.(*ast.Ident); !ok || id.Name != "Error" || f.Name.Name != "refusal" {
					return true
				}
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Code" {
							add(kv.Value)
						}
					}
				}
			case *ast.ValueSpec: // const codeImportFailed = "import_failed", in a file that makes refusals
				for i, name := range n.Names {
					if makesRefusals && strings.HasPrefix(name.Name, "code") && i < len(n.Values) {
						add(n.Values[i])
					}
				}
			case *ast.FuncDecl: // func (k Kind) TooManyCode() string { … return "too_many_images" }
				if n.Name.Name == "TooManyCode" && n.Body != nil {
					ast.Inspect(n.Body, func(m ast.Node) bool {
						if r, ok := m.(*ast.ReturnStmt); ok && len(r.Results) == 1 {
							add(r.Results[0])
						}
						return true
					})
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(codes) < 30 {
		t.Fatalf("found only %d refusal codes in the source: the search is broken", len(codes))
	}
	for code, where := range codes {
		if _, ok := refusalStatus[code]; !ok {
			t.Errorf("refusal code %q (%s) has no HTTP status in refusalStatus", code, where)
		}
	}
	for code := range refusalStatus {
		if _, ok := codes[code]; !ok {
			t.Errorf("refusalStatus lists %q, which no product code makes", code)
		}
	}
}

// Package architecture holds the tests of the code's shape: which package owns each table and money
// column, and which package may import which (docs/architecture.md). It has no code of its own.
package architecture

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// owner is a package that alone may write some rows: the tables it owns (in SQL text), their GORM models,
// and columns of other tables (an UPDATE … SET col =, a GORM Update of the column, a struct literal or
// a Save that writes it).
type owner struct {
	pkg     string
	tables  []string
	models  []string          // "videogen/models.Task"
	columns map[string]string // column → its Go field on the model that holds it ("available_micros" → "Account.AvailableMicros")
}

// owners: each lifecycle table has one owner, whose transitions are guarded by the state they leave; the
// balances move only in the ledger, which writes an entry with each move; the audit log is appended by
// internal/domain/audit alone.
var owners = []owner{
	{pkg: "videogen/internal/domain/tasks", tables: []string{"tasks", "task_events"}, models: []string{"videogen/models.Task", "videogen/models.TaskEvent"},
		columns: map[string]string{"waiting_tasks": "Account.WaitingTasks", "in_flight": "UpstreamCredential.InFlight"}},
	{pkg: "videogen/billing/topups", tables: []string{"topups", "billing_profiles"},
		models: []string{"videogen/models.Topup", "videogen/models.BillingProfile"}},
	{pkg: "videogen/billing", tables: []string{"ledger_entries"}, models: []string{"videogen/models.LedgerEntry"},
		columns: map[string]string{"available_micros": "Account.AvailableMicros", "reserved_micros": "Account.ReservedMicros"}},
	{pkg: "videogen/internal/domain/audit", tables: []string{"audit_log"}, models: []string{"videogen/models.AuditEntry"}},
	// Invitations are issued, spent and withdrawn under the account's member lock (docs/members.md).
	{pkg: "videogen/internal/domain/members", tables: []string{"invitations"}, models: []string{"videogen/models.Invitation"}},
}

// exempt are packages that write such rows without being part of the product's running code: the
// benchmark (its pgbench script runs the create transaction's SQL on a throwaway database, to measure the
// ceiling the store is held against) and test support (testkit, margintest, and testkit/seed, which writes
// a year of a customer base by SQL for the scale benchmark and the query-plan test), which sets up rows for
// tests as tests do and is never linked into the binary.
func exempt(pkg string) bool {
	switch pkg {
	case "videogen/cmd/videogen-bench", "videogen/internal/testkit", "videogen/internal/testkit/seed", "videogen/internal/staff/margin/margintest":
		return true
	}
	return false
}

// tableOf is the table of a model whose columns an owner holds.
var tableOf = map[string]string{"Account": "accounts", "UpstreamCredential": "upstream_credentials"}

// tableName matches a table name as SQL may write it: bare, quoted, or qualified by its schema.
func tableName(table string) string { return `(?:"?\w+"?\.)?"?` + table + `"?\b` }

var gormWrites = map[string]bool{"Create": true, "CreateInBatches": true, "Save": true, "Update": true, "Updates": true,
	"UpdateColumn": true, "UpdateColumns": true, "Delete": true, "FirstOrCreate": true}

// finding is one write outside its owner.
type finding struct {
	pos  token.Position
	what string
}

func (f finding) String() string { return fmt.Sprintf("%s: %s", f.pos, f.what) }

// writesOutsideOwners reads the packages' non-test files and returns every write of an owned row made
// outside its owner, and how many files it read.
func writesOutsideOwners(pkgs []*packages.Package) ([]finding, int) {
	var out []finding
	files := 0
	for _, p := range pkgs {
		if exempt(p.PkgPath) {
			continue
		}
		// The rules that bind this package: everyone's but its own.
		var rules []owner
		for _, o := range owners {
			if o.pkg != p.PkgPath {
				rules = append(rules, o)
			}
		}
		for _, f := range p.Syntax {
			if strings.HasSuffix(p.Fset.Position(f.Pos()).Filename, "_test.go") {
				continue
			}
			files++
			out = append(out, inspect(p, f, rules)...)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].pos.Filename != out[j].pos.Filename {
			return out[i].pos.Filename < out[j].pos.Filename
		}
		return out[i].pos.Line < out[j].pos.Line
	})
	return out, files
}

func inspect(p *packages.Package, f *ast.File, rules []owner) []finding {
	var out []finding
	flag := func(pos token.Pos, format string, args ...any) {
		out = append(out, finding{pos: p.Fset.Position(pos), what: fmt.Sprintf(format, args...)})
	}
	// ownerOfModel names the owner of a GORM model type (through pointers and slices), if one binds here.
	ownerOfModel := func(tv types.Type) (string, string) {
		for {
			switch x := tv.(type) {
			case *types.Pointer:
				tv = x.Elem()
				continue
			case *types.Slice:
				tv = x.Elem()
				continue
			case *types.Named:
				if x.Obj().Pkg() == nil {
					return "", ""
				}
				name := x.Obj().Pkg().Path() + "." + x.Obj().Name()
				for _, o := range rules {
					for _, m := range o.models {
						if m == name {
							return o.pkg, x.Obj().Name()
						}
					}
				}
			}
			return "", ""
		}
	}
	ownerOfColumn := func(col string) string {
		for _, o := range rules {
			if _, ok := o.columns[col]; ok {
				return o.pkg
			}
		}
		return ""
	}
	// checkSQL flags SQL text that writes what another package owns.
	checkSQL := func(pos token.Pos, s string) {
		for _, o := range rules {
			for _, table := range o.tables {
				if regexp.MustCompile(`(?is)\b(update|insert\s+into|delete\s+from)\s+` + tableName(table)).MatchString(s) {
					flag(pos, "writes %s, which only %s may write", table, o.pkg)
				}
			}
			for col, field := range o.columns {
				// An assignment in an UPDATE's SET or an upsert's DO UPDATE SET, the column perhaps qualified
				// by an alias (a comparison in a WHERE reads the column: fine), or the column given a value
				// in an INSERT.
				set := regexp.MustCompile(`(?is)\b(update|on\s+conflict)\b[^;]*?\bset\b[^;]*?(?:\b\w+\.)?"?\b` + col + `"?\s*=[^=]`)
				insert := regexp.MustCompile(`(?is)\binsert\s+into\s+` + tableName(tableOf[strings.Split(field, ".")[0]]) + `\s*\([^)]*\b` + col + `\b`)
				if set.MatchString(s) || insert.MatchString(s) {
					flag(pos, "sets %s, which only %s may set", col, o.pkg)
				}
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if n.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(n.Value); err == nil {
				checkSQL(n.Pos(), s)
			}
		case *ast.BinaryExpr:
			// "DELETE FROM " + "audit_log": a constant made of pieces is read whole.
			if tv, ok := p.TypesInfo.Types[n]; ok && tv.Value != nil && tv.Value.Kind() == constant.String {
				checkSQL(n.Pos(), constant.StringVal(tv.Value))
			}
		case *ast.AssignStmt:
			// acct.AvailableMicros = …, then a Create or Updates of acct: a balance set outside the ledger.
			for _, lhs := range n.Lhs {
				sel, ok := lhs.(*ast.SelectorExpr)
				if !ok {
					continue
				}
				named, ok := derefNamed(p.TypesInfo.TypeOf(sel.X))
				if !ok || !strings.HasPrefix(named, "videogen/models.") {
					continue
				}
				field := strings.TrimPrefix(named, "videogen/models.") + "." + sel.Sel.Name
				for _, o := range rules {
					for col, f := range o.columns {
						if f == field {
							flag(n.Pos(), "sets %s (%s), which only %s may set", field, col, o.pkg)
						}
					}
				}
			}
		case *ast.CompositeLit:
			// models.Account{AvailableMicros: …}: a balance made outside the ledger.
			tv := p.TypesInfo.TypeOf(n)
			named, ok := tv.(*types.Named)
			if !ok || named.Obj().Pkg() == nil || named.Obj().Pkg().Path() != "videogen/models" {
				return true
			}
			for _, el := range n.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, ok := kv.Key.(*ast.Ident)
				if !ok {
					continue
				}
				for _, o := range rules {
					for col, field := range o.columns {
						if field == named.Obj().Name()+"."+key.Name {
							flag(kv.Pos(), "sets %s (%s), which only %s may set", field, col, o.pkg)
						}
					}
				}
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || !gormWrites[sel.Sel.Name] {
				return true
			}
			// A method of GORM's DB (topups.Create is the owner's own function, called as it should be).
			if recv, ok := derefNamed(p.TypesInfo.TypeOf(sel.X)); !ok || recv != "gorm.io/gorm.DB" {
				return true
			}
			// tx.Create(&task), db.Delete(&models.TaskEvent{}, …)
			for _, a := range n.Args {
				if pkg, model := ownerOfModel(p.TypesInfo.TypeOf(a)); pkg != "" {
					flag(n.Pos(), "%s of a %s, which only %s may write", sel.Sel.Name, model, pkg)
				}
				if sel.Sel.Name == "Save" {
					if named, ok := derefNamed(p.TypesInfo.TypeOf(a)); ok && named == "videogen/models.Account" {
						flag(n.Pos(), "Save of an Account writes its balances, which only the ledger may set")
					}
				}
			}
			// Update("available_micros", …), UpdateColumn(…), Updates(map[string]any{"available_micros": …})
			if len(n.Args) > 0 {
				if lit, ok := n.Args[0].(*ast.BasicLit); ok && (sel.Sel.Name == "Update" || sel.Sel.Name == "UpdateColumn") {
					if col, err := strconv.Unquote(lit.Value); err == nil {
						if pkg := ownerOfColumn(col); pkg != "" {
							flag(n.Pos(), "%s of %s, which only %s may set", sel.Sel.Name, col, pkg)
						}
					}
				}
				if m, ok := n.Args[0].(*ast.CompositeLit); ok && (sel.Sel.Name == "Updates" || sel.Sel.Name == "UpdateColumns") {
					for _, el := range m.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if lit, ok := kv.Key.(*ast.BasicLit); ok {
								if col, err := strconv.Unquote(lit.Value); err == nil {
									if pkg := ownerOfColumn(col); pkg != "" {
										flag(kv.Pos(), "%s of %s, which only %s may set", sel.Sel.Name, col, pkg)
									}
								}
							}
						}
					}
				}
			}
			// db.Model(&models.Task{}).Update(…), db.Table("tasks").Delete(…)
			for x := sel.X; ; {
				call, ok := x.(*ast.CallExpr)
				if !ok {
					break
				}
				inner, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					break
				}
				if inner.Sel.Name == "Model" && len(call.Args) == 1 {
					if pkg, model := ownerOfModel(p.TypesInfo.TypeOf(call.Args[0])); pkg != "" {
						flag(n.Pos(), "%s of a %s, which only %s may write", sel.Sel.Name, model, pkg)
					}
				}
				if inner.Sel.Name == "Table" && len(call.Args) == 1 {
					if lit, ok := call.Args[0].(*ast.BasicLit); ok {
						table, _ := strconv.Unquote(lit.Value)
						for _, o := range rules {
							for _, t := range o.tables {
								if t == table {
									flag(n.Pos(), "%s on %s, which only %s may write", sel.Sel.Name, table, o.pkg)
								}
							}
						}
					}
				}
				x = inner.X
			}
		}
		return true
	})
	return out
}

func derefNamed(tv types.Type) (string, bool) {
	for {
		switch x := tv.(type) {
		case *types.Pointer:
			tv = x.Elem()
			continue
		case *types.Named:
			if x.Obj().Pkg() == nil {
				return "", false
			}
			return x.Obj().Pkg().Path() + "." + x.Obj().Name(), true
		}
		return "", false
	}
}

func load(t *testing.T, patterns ...string) []*packages.Package {
	t.Helper()
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes |
		packages.NeedTypesInfo | packages.NeedImports, Dir: "../.."}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			t.Fatalf("load %s: %v", p.PkgPath, p.Errors)
		}
	}
	return pkgs
}

// TestOwnership: no package writes rows another owns — tasks and their log (internal/domain/tasks), top-ups
// and billing profiles (billing/topups), ledger entries and the balances (billing's ledger), the audit
// log (internal/domain/audit) — neither in SQL text nor through GORM. Tests are exempt: they set up odd states
// on purpose.
func TestOwnership(t *testing.T) {
	found, files := writesOutsideOwners(load(t, "./..."))
	if files < 100 {
		t.Fatalf("only %d files checked: the loader did not see the module", files)
	}
	for _, f := range found {
		t.Error(f)
	}
}

// TestOwnershipCatchesPlantedWrites: a package with one write of each kind, each outside its owner
// (testdata/planted, marked `// want`), is caught on exactly those lines — so TestOwnership passing means
// something.
func TestOwnershipCatchesPlantedWrites(t *testing.T) {
	pkgs := load(t, "./internal/architecture/testdata/planted")
	found, _ := writesOutsideOwners(pkgs)
	want := map[int]bool{}
	for _, f := range pkgs[0].Syntax {
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if strings.HasPrefix(c.Text, "// want") {
					want[pkgs[0].Fset.Position(c.Pos()).Line] = true
				}
			}
		}
	}
	if len(want) < 15 {
		t.Fatalf("only %d planted writes marked", len(want))
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
			t.Errorf("planted write on line %d not caught", line)
		}
	}
}

package tasks_test

import (
	"go/ast"
	"go/token"
	"go/types"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"

	"videogen/internal/tasks"
)

// TestOnlyTheStoreWritesTasks: no package but internal/tasks writes the tasks table, the task log, an
// account's backlog counter or a credential's in_flight — neither in SQL text nor through GORM on the
// Task and TaskEvent models. Tests are exempt (they set up odd states on purpose).
func TestOnlyTheStoreWritesTasks(t *testing.T) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo, Dir: "../.."}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		t.Fatal(err)
	}
	sqlWrite := regexp.MustCompile(`(?is)\b(update|insert\s+into|delete\s+from)\s+(tasks|task_events)\b|\bwaiting_tasks\s*=|\bin_flight\s*=`)
	gormWrites := map[string]bool{"Create": true, "CreateInBatches": true, "Save": true, "Update": true, "Updates": true,
		"UpdateColumn": true, "UpdateColumns": true, "Delete": true, "FirstOrCreate": true}
	owned := map[string]bool{"videogen/models.Task": true, "videogen/models.TaskEvent": true}
	isOwnedModel := func(tv types.Type) bool {
		for {
			switch x := tv.(type) {
			case *types.Pointer:
				tv = x.Elem()
				continue
			case *types.Slice:
				tv = x.Elem()
				continue
			case *types.Named:
				return owned[x.Obj().Pkg().Path()+"."+x.Obj().Name()]
			}
			return false
		}
	}
	checked := 0
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			t.Fatalf("load %s: %v", p.PkgPath, p.Errors)
		}
		// The store itself; and the benchmark, whose pgbench script runs the create transaction's raw SQL
		// on a throwaway database to measure the ceiling the store is held against.
		// Test-support packages (testkit, margintest) set up rows for tests, like tests, and are never
		// linked into the binary.
		if p.PkgPath == "videogen/internal/tasks" || p.PkgPath == "videogen/cmd/videogen-bench" || strings.HasSuffix(p.PkgPath, "test") {
			continue
		}
		for _, f := range p.Syntax {
			if strings.HasSuffix(p.Fset.Position(f.Pos()).Filename, "_test.go") {
				continue
			}
			checked++
			where := func(pos token.Pos) string { return p.Fset.Position(pos).String() }
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.BasicLit:
					if n.Kind == token.STRING {
						if s, err := strconv.Unquote(n.Value); err == nil && sqlWrite.MatchString(s) {
							t.Errorf("%s: writes what only internal/tasks may write: %q", where(n.Pos()), sqlWrite.FindString(s))
						}
					}
				case *ast.CallExpr:
					sel, ok := n.Fun.(*ast.SelectorExpr)
					if !ok || !gormWrites[sel.Sel.Name] {
						return true
					}
					// tx.Create(&task), db.Model(&models.Task{}).Update(...), db.Delete(&models.TaskEvent{}, ...)
					for _, a := range n.Args {
						if isOwnedModel(p.TypesInfo.TypeOf(a)) {
							t.Errorf("%s: %s on a task outside internal/tasks", where(n.Pos()), sel.Sel.Name)
						}
					}
					for x := sel.X; ; {
						call, ok := x.(*ast.CallExpr)
						if !ok {
							break
						}
						inner, ok := call.Fun.(*ast.SelectorExpr)
						if !ok {
							break
						}
						if inner.Sel.Name == "Model" && len(call.Args) == 1 && isOwnedModel(p.TypesInfo.TypeOf(call.Args[0])) {
							t.Errorf("%s: %s on a task outside internal/tasks", where(n.Pos()), sel.Sel.Name)
						}
						if inner.Sel.Name == "Table" && len(call.Args) == 1 {
							if lit, ok := call.Args[0].(*ast.BasicLit); ok && (lit.Value == `"tasks"` || lit.Value == `"task_events"`) {
								t.Errorf("%s: %s on %s outside internal/tasks", where(n.Pos()), sel.Sel.Name, lit.Value)
							}
						}
						x = inner.X
					}
				}
				return true
			})
		}
	}
	if checked < 50 {
		t.Fatalf("only %d files checked: the loader did not see the module", checked)
	}
}

// TestTransitions: the table allows exactly the moves of the interface and docs/design.md §5 — forward,
// and from queued straight to an end — and nothing out of an ending.
func TestTransitions(t *testing.T) {
	all := []string{tasks.Queued, tasks.InProgress, tasks.Completed, tasks.Failed}
	allowed := map[[2]string]bool{
		{tasks.Queued, tasks.InProgress}: true, {tasks.Queued, tasks.Completed}: true, {tasks.Queued, tasks.Failed}: true,
		{tasks.InProgress, tasks.Completed}: true, {tasks.InProgress, tasks.Failed}: true,
	}
	for _, from := range all {
		for _, to := range all {
			if got := tasks.CanMove(from, to); got != allowed[[2]string{from, to}] {
				t.Errorf("%s → %s allowed: %v", from, to, got)
			}
		}
		if tasks.Terminal(from) != (from == tasks.Completed || from == tasks.Failed) {
			t.Errorf("%s terminal: %v", from, tasks.Terminal(from))
		}
	}
}

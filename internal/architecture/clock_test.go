package architecture

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path/filepath"
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

// wallClock are the functions of package time that read the wall clock or wait on it.
var wallClock = map[string]bool{"Now": true, "Since": true, "Until": true, "NewTicker": true, "Tick": true,
	"NewTimer": true, "After": true, "AfterFunc": true}

// wallClockDirs are where time is the injected clock's alone: the domain, billing, the background jobs
// and the queues (docs/architecture.md, "The clock").
var wallClockDirs = []string{"internal/domain", "billing", "internal/jobs", "internal/infra/queue"}

// wallClockUse is one function's use of one wall-clock function: the file (from the module's root), the
// function ("Type.Method", "Func", or "" outside any) and the time function.
type wallClockUse struct{ file, fn, call string }

// wallClockAllowed are the uses of the wall clock in wallClockDirs, each for its reason: measuring how
// long something took in this process, bounding a wait in this process (a deadline, a timer, a poll), or
// reading what a remote party dated by its own clock. Anything stored, compared with what is stored, or
// that a test must move takes the injected clock.
var wallClockAllowed = map[wallClockUse]string{
	// Latency measurement.
	{"internal/domain/videos/service.go", "Service.create", "Since"}:        "latency of the create call, recorded in its call-log row",
	{"internal/domain/upstream/pool.go", "Pool.Submit", "Now"}:              "when the call was sent, in this process: a refusal sent before a reload is stale (note)",
	{"internal/domain/upstream/pool.go", "Pool.Poll", "Now"}:                "when the call was sent, in this process: a refusal sent before a reload is stale (note)",
	{"internal/domain/upstream/pool.go", "Pool.Download", "Now"}:            "when the call was sent, in this process: a refusal sent before a reload is stale (note)",
	{"internal/domain/upstream/pool.go", "Pool.Sync", "Now"}:                "when this process reloaded, against the calls' send times above",
	{"internal/domain/apikeys/apikeys.go", "NewAuthenticator", "Since"}:     "the key cache's age of entries, in this process",
	{"internal/domain/apikeys/apikeys.go", "Authenticator.load", "Now"}:     "when the key cache read the row, in this process (its entries' age)",
	{"internal/domain/apikeys/apikeys.go", "Authenticator.touch", "Now"}:    "the last-use cache's age of entries, in this process; the row is stamped by the injected clock",
	{"internal/domain/videos/service.go", "Service.Poll", "Now"}:            "the poll cache's freshness in this process: a test holding its clock still must not make a cached poll last for ever",
	{"internal/domain/calllog/writer.go", "Writer.Record", "Now"}:           "the age of a batch of the group commit, in this process",
	{"internal/domain/calllog/writer.go", "Writer.commit", "Now"}:           "the deadline of a batch's retries, in this process",
	{"internal/domain/upstream/ark/errors.go", "classify", "Now"}:           "a Retry-After HTTP date is the provider's wall clock",
	{"internal/domain/upstream/openai/openai.go", "classify", "Now"}:        "a Retry-After HTTP date is the provider's wall clock",
	{"internal/domain/upstream/gemini/status.go", "classify", "Now"}:        "a Retry-After HTTP date is the provider's wall clock",
	{"internal/domain/upstream/gemini/gemini.go", "Client.Download", "Now"}: "a Retry-After HTTP date is the provider's wall clock",
	// Deadlines and waits in this process.
	{"internal/domain/videos/cancel.go", "Service.Cancel", "Now"}:          "how long a cancel waits for a worker's hold, in this process",
	{"internal/domain/videos/cancel.go", "sleep", "NewTimer"}:              "a wait that ends with its context",
	{"internal/domain/worker/sweep.go", "Worker.sweepLoop", "NewTicker"}:   "the deadline sweep's poll",
	{"internal/domain/worker/complete.go", "Worker.complete", "AfterFunc"}: "a download's idle deadline",
	{"internal/domain/worker/worker.go", "Worker.Run", "NewTimer"}:         "the worker's poll",
	{"internal/domain/worker/worker.go", "Worker.Run", "Now"}:              "the spacing of claims, in this process",
	{"internal/domain/worker/worker.go", "Worker.Run", "Since"}:            "the spacing of claims, in this process",
	{"internal/domain/worker/worker.go", "Worker.Run", "After"}:            "the spacing of claims, in this process",
	{"internal/domain/worker/worker.go", "Worker.keepLease", "NewTicker"}:  "the lease's renewal, every third of it",
}

// wallClockFinding is one use of the wall clock, where it is.
type wallClockFinding struct {
	use wallClockUse
	pos token.Position
}

// wallClockUses parses every non-test Go file under dirs (from root) and returns each use of a wall-clock
// function of package time — a call, or the function passed on as a value — and how many files it read.
func wallClockUses(t *testing.T, root string, dirs []string) (found []wallClockFinding, files int) {
	t.Helper()
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			files++
			name := timeImport(f)
			if name == "" {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			record := func(fn string, n ast.Node) {
				ast.Inspect(n, func(n ast.Node) bool {
					sel, ok := n.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == name && wallClock[sel.Sel.Name] {
						found = append(found, wallClockFinding{use: wallClockUse{rel, fn, sel.Sel.Name}, pos: fset.Position(sel.Pos())})
					}
					return true
				})
			}
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok {
					record("", decl)
					continue
				}
				fn := fd.Name.Name
				if fd.Recv != nil && len(fd.Recv.List) == 1 {
					fn = receiverName(fd.Recv.List[0].Type) + "." + fn
				}
				record(fn, fd)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return found, files
}

// timeImport is the name package time goes by in f ("" when f does not import it).
func timeImport(f *ast.File) string {
	for _, imp := range f.Imports {
		if imp.Path.Value != `"time"` {
			continue
		}
		if imp.Name != nil {
			return imp.Name.Name
		}
		return "time"
	}
	return ""
}

// receiverName is the type's name of a method's receiver: T of T, *T, T[P] or *T[P].
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}

// TestOneClock: the domain, billing, the background jobs and the queues read and wait on time only
// through the injected clock (docs/architecture.md, "The clock"), but for the uses wallClockAllowed lists
// with their reasons; each entry there is still in use.
func TestOneClock(t *testing.T) {
	found, files := wallClockUses(t, "../..", wallClockDirs)
	if files < 100 {
		t.Fatalf("only %d files read: the walk did not see the module", files)
	}
	used := map[wallClockUse]bool{}
	for _, f := range found {
		if wallClockAllowed[f.use] != "" {
			used[f.use] = true
			continue
		}
		in := f.use.fn
		if in == "" {
			in = "a declaration outside any function"
		}
		t.Errorf("%s: time.%s in %s: use the injected clock (the caller's func() time.Time); only latency measured "+
			"or a wait bounded in this process may use the wall clock, listed with its reason in wallClockAllowed",
			f.pos, f.use.call, in)
	}
	for use, why := range wallClockAllowed {
		if !used[use] {
			t.Errorf("wallClockAllowed lists time.%s in %s of %s (%s), which is no longer there: take the entry out",
				use.call, use.fn, use.file, why)
		}
	}
}

// TestOneClockCatchesPlantedUses: the uses planted in testdata/wallclock (marked `// want`) are found on
// exactly those lines, and what is not the wall clock is not.
func TestOneClockCatchesPlantedUses(t *testing.T) {
	found, _ := wallClockUses(t, ".", []string{"testdata/wallclock"})
	src, err := os.ReadFile("testdata/wallclock/wallclock.go")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]bool{}
	for i, line := range strings.Split(string(src), "\n") {
		if strings.HasSuffix(line, "// want") {
			want[i+1] = true
		}
	}
	if len(want) != 9 {
		t.Fatalf("%d planted uses marked, want 9", len(want))
	}
	got := map[int]bool{}
	for _, f := range found {
		got[f.pos.Line] = true
		if !want[f.pos.Line] {
			t.Errorf("flagged a line not planted: %s (%v)", f.pos, f.use)
		}
	}
	for line := range want {
		if !got[line] {
			t.Errorf("planted use on line %d not caught", line)
		}
	}
	if f := found[0]; f.use.fn != "Sweeper.Sweep" || f.use.call != "Now" {
		t.Errorf("the first use is placed in %q (time.%s), want Sweeper.Sweep (time.Now)", f.use.fn, f.use.call)
	}
}

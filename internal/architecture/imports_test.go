package architecture

import (
	"sort"
	"strings"
	"testing"
)

// The layers, from the bottom (docs/architecture.md, "Layers"). A package may import its own layer and
// those below it, never one above: the domain knows nothing of HTTP or pages, a background job nothing of
// the staff console, and nothing but the assembly (internal/server, cmd) knows every part.
const (
	base         = iota // models, migrations, static, internal/money, internal/refusal, internal/infra/...
	domain              // billing/..., internal/domain/...
	jobsOrStaff         // internal/jobs/... (background jobs), internal/staff/... (staff and operator tools)
	presentation        // views/...
	web                 // handlers/...
	assembly            // internal/server, cmd/..., and what exists for tests (testkit, architecture)
)

var layerNames = []string{"base", "domain", "jobs and staff tools", "views", "handlers", "assembly"}

// layerOf is the layer of a package of this module, by its path.
func layerOf(pkg string) int {
	p := strings.TrimPrefix(pkg, "videogen/")
	in := func(dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	switch {
	case exempt(pkg): // test support and the benchmark, as the ownership rules say
		return assembly
	case in("models"), in("migrations"), in("static"), in("internal/money"), in("internal/refusal"), in("internal/infra"):
		return base
	case in("billing"), in("internal/domain"):
		return domain
	case in("internal/jobs"), in("internal/staff"):
		return jobsOrStaff
	case in("views"):
		return presentation
	case in("handlers"):
		return web
	}
	return assembly // internal/server, cmd, client, internal/testkit, internal/architecture
}

// exceptions are imports the layers would refuse, each allowed for a reason.
var exceptions = map[[2]string]string{
	// The domain sends e-mails; what an e-mail says and looks like is a view, the only one it renders.
	{"videogen/internal/domain/notify", "videogen/views/email"}: "e-mails are composed from their templ views",
}

// leaves import nothing of the project: every layer may use them, so they may use nothing.
var leaves = map[string]bool{"videogen/internal/money": true, "videogen/internal/refusal": true}

// ledgerCallers are the only packages that import billing, the ledger: what moves money (tasks settle,
// videos reserve, payments credit), the pages and the command line that show or adjust a balance, and
// the assembly. Everything else that deals in amounts uses internal/money.
var ledgerCallers = []string{"videogen/billing/", "videogen/internal/domain/tasks", "videogen/internal/domain/videos",
	"videogen/handlers/", "videogen/internal/server", "videogen/cmd/", "videogen/internal/testkit"}

// importAllowed reports whether pkg may import dep, and why not.
func importAllowed(pkg, dep string) (bool, string) {
	if !strings.HasPrefix(dep, "videogen/") {
		return true, ""
	}
	if leaves[pkg] {
		return false, "a leaf package imports nothing of the project"
	}
	if dep == "videogen/billing" {
		caller := false
		for _, c := range ledgerCallers {
			caller = caller || pkg == strings.TrimSuffix(c, "/") || strings.HasPrefix(pkg, c)
		}
		if !caller {
			return false, "only the ledger's callers import billing; amounts are internal/money"
		}
	}
	if _, ok := exceptions[[2]string{pkg, dep}]; ok {
		return true, ""
	}
	from, to := layerOf(pkg), layerOf(dep)
	if to > from {
		return false, layerNames[from] + " may not import " + layerNames[to]
	}
	// Background jobs and staff tools share a layer but not a purpose: neither imports the other.
	if from == jobsOrStaff && to == jobsOrStaff {
		fromJob, toJob := strings.Contains(pkg, "/internal/jobs/"), strings.Contains(dep, "/internal/jobs/")
		if fromJob != toJob {
			return false, "background jobs and staff tools do not import each other"
		}
	}
	// Within the HTTP layer: the audiences share handlers/web and handlers/twostep (the second sign-in
	// step's pages, the staff's and the console's), and only support reaches into the console (a tenant's
	// pages are the console's own); handlers/web and handlers/twostep import no audience.
	if from == web && to == web {
		audience := func(p string) string {
			rest := strings.TrimPrefix(strings.TrimPrefix(p, "videogen/handlers"), "/")
			return strings.SplitN(rest, "/", 2)[0]
		}
		a, b := audience(pkg), audience(dep)
		switch {
		case a == "": // handlers itself assembles them all
		case b == "web", a == b:
		case b == "twostep" && a != "web":
		case a == "support" && b == "console":
		default:
			return false, "handlers/" + a + " may not import handlers/" + b
		}
	}
	// Within the views: staff pages may show the customer's (a task is shown to staff through the
	// customer's own task views), never the reverse; the shared frame imports no audience.
	if from == presentation && to == presentation {
		a := strings.TrimPrefix(strings.TrimPrefix(pkg, "videogen/views"), "/")
		b := strings.TrimPrefix(strings.TrimPrefix(dep, "videogen/views"), "/")
		if b != "" && a != b && !(a == "staff" && b == "customer") {
			return false, "views/" + a + " may not import views/" + b
		}
	}
	return true, ""
}

// TestLayers: every import of the module's packages keeps to the layers.
func TestLayers(t *testing.T) {
	pkgs := load(t, "./...")
	checked := 0
	var broken []string
	for _, p := range pkgs {
		for dep := range p.Imports {
			checked++
			if ok, why := importAllowed(p.PkgPath, dep); !ok {
				broken = append(broken, p.PkgPath+" imports "+dep+": "+why)
			}
		}
	}
	if checked < 300 {
		t.Fatalf("only %d imports checked: the loader did not see the module", checked)
	}
	sort.Strings(broken)
	for _, b := range broken {
		t.Error(b)
	}
}

// TestLayersRefuse: the rule says no to each kind of import it exists to stop, so TestLayers passing
// means something.
func TestLayersRefuse(t *testing.T) {
	for _, tc := range []struct{ pkg, dep string }{
		{"videogen/internal/domain/tasks", "videogen/handlers/web"},
		{"videogen/internal/domain/videos", "videogen/views/customer"},
		{"videogen/billing", "videogen/internal/staff/admin"},
		{"videogen/internal/infra/db", "videogen/internal/domain/tasks"},
		{"videogen/models", "videogen/billing"},
		{"videogen/internal/jobs/janitor", "videogen/internal/staff/ops"},
		{"videogen/internal/staff/ops", "videogen/internal/jobs/ledgercheck"},
		{"videogen/views", "videogen/handlers/web"},
		{"videogen/handlers/web", "videogen/handlers/api"},
		{"videogen/handlers/console", "videogen/handlers/support"},
		{"videogen/handlers/twostep", "videogen/handlers/console"},
		{"videogen/handlers/web", "videogen/handlers/twostep"},
		{"videogen/handlers/api", "videogen/handlers/console"},
		{"videogen/views/customer", "videogen/views/staff"},
		{"videogen/views", "videogen/views/customer"},
		{"videogen/handlers/web", "videogen/internal/server"},
		{"videogen/internal/domain/notify", "videogen/views/customer"},
		{"videogen/internal/money", "videogen/internal/infra/storetext"},
		{"videogen/views", "videogen/billing"},
		{"videogen/internal/domain/upstream", "videogen/billing"},
		{"videogen/internal/infra/config", "videogen/billing"},
		{"videogen/internal/staff/admin", "videogen/billing"},
	} {
		if ok, _ := importAllowed(tc.pkg, tc.dep); ok {
			t.Errorf("%s may import %s", tc.pkg, tc.dep)
		}
	}
	for _, tc := range []struct{ pkg, dep string }{
		{"videogen/handlers/support", "videogen/handlers/console"},
		{"videogen/views/staff", "videogen/views/customer"},
		{"videogen/internal/domain/notify", "videogen/views/email"},
		{"videogen/internal/server", "videogen/handlers"},
		{"videogen/internal/staff/metrics", "videogen/internal/staff/ops"},
		{"videogen/billing/payments", "videogen/internal/infra/runner"},
		{"videogen/billing/payments", "videogen/billing"},
		{"videogen/internal/domain/tasks", "videogen/billing"},
		{"videogen/views", "videogen/internal/money"},
	} {
		if ok, why := importAllowed(tc.pkg, tc.dep); !ok {
			t.Errorf("%s may not import %s: %s", tc.pkg, tc.dep, why)
		}
	}
}

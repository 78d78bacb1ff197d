# videogen — `make run` serves the whole product on SQLite; `make test` runs every test.
GO      ?= go
BIN     := bin/videogen
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# The S3-compatible server the storage tests run against (docs/design.md §7), built once into a cache folder that
# .ci/run reuses: $XDG_CACHE_HOME (when absolute, as XDG requires) or ~/.cache. The tests find it here.
VERSITYGW_VERSION := v1.8.0
VERSITYGW_DIR     := $(if $(filter /%,$(XDG_CACHE_HOME)),$(XDG_CACHE_HOME),$(HOME)/.cache)/videogen/versitygw-$(VERSITYGW_VERSION)
export VERSITYGW  := $(VERSITYGW_DIR)/versitygw
# Stripe's own mock of its API, which the payment tests drive stripe-go against (docs/stripe.md).
STRIPE_MOCK_VERSION := v0.203.0
STRIPE_MOCK_DIR     := $(if $(filter /%,$(XDG_CACHE_HOME)),$(XDG_CACHE_HOME),$(HOME)/.cache)/videogen/stripe-mock-$(STRIPE_MOCK_VERSION)
export STRIPE_MOCK  := $(STRIPE_MOCK_DIR)/stripe-mock
# The OpenAI Node SDK the SDK tests drive, at the version its lock file pins (npm ci; the npm registry).
OPENAI_NODE_DIR := internal/testkit/testdata/openai-node

.PHONY: run build generate test test-deps check-generated bench bench-scale fuzz vet fmt clean

run: build ## build and serve on localhost:8080, this machine only (SQLite under data/, built-in simulator, test top-ups); Ctrl-C drains 5 s, twice stops at once
	TEST_TOPUPS=1 ./$(BIN) serve

build:
	$(GO) build -ldflags "-X main.buildVersion=$$(git describe --always --dirty 2>/dev/null || echo unknown)" -o $(BIN) ./cmd/videogen

generate: ## regenerate the templ views (templ is a tool dependency in go.mod)
	$(GO) tool templ generate -path views

# The generated views must match their .templ sources: regenerate and fail if anything changed.
check-generated:
	@before=$$(find views -name '*_templ.go' | sort | xargs cat | sha256sum); $(GO) tool templ generate -path views >/dev/null; \
	after=$$(find views -name '*_templ.go' | sort | xargs cat | sha256sum); \
	[ "$$before" = "$$after" ] || { echo "the generated views (views/**/*_templ.go) were stale; they are regenerated now: commit them"; exit 1; }

# The race detector instruments our code and every library but two, whose memory accesses are not ours to
# race on and cost most of the suite's CPU under it: the pure-Go SQLite (modernc.org: C translated to Go,
# every parse and page access of it instrumented and checkptr-checked; its own tests cover it) and argon2
# (x/crypto: 19 MiB touched per password hash, three times slower instrumented). Their locks and channels
# are Go's own and still seen; ours around them are all checked (docs/decisions.md, "Tests on two cores").
RACE_GCFLAGS := -gcflags='modernc.org/...=-d=checkptr=0 -race=false' -gcflags='golang.org/x/crypto/argon2=-race=false'

test: test-deps check-generated ## every test, race detector on; PostgreSQL too when TEST_DATABASE_URL is set
	$(GO) vet ./...
	$(GO) test -race $(RACE_GCFLAGS) -count=1 -timeout 30m ./...
	# Allocation counts hold only without the race detector's instrumentation (files tagged !race).
	$(GO) test -count=1 -run 'AllocatesNothing' ./internal/infra/ids/

# Tools the tests drive that a fresh machine lacks: ffmpeg decodes the simulator's videos, chromium runs
# the browser tests, node runs the OpenAI Node SDK, caddy is the reverse proxy of the replica tests and
# validates deploy/Caddyfile, promtool (package prometheus) tests deploy/prometheus/alerts.yml (Debian
# packages); versitygw serves S3 to the storage
# tests and stripe-mock serves Stripe's API to the payment tests (both built from the Go module proxy,
# about 3 minutes, once); npm installs the OpenAI Node SDK from its lock file.
test-deps:
	@missing=""; \
	command -v ffmpeg >/dev/null && command -v ffprobe >/dev/null || missing="$$missing ffmpeg"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v node >/dev/null && command -v npm >/dev/null || missing="$$missing nodejs npm"; \
	command -v caddy >/dev/null || missing="$$missing caddy"; \
	command -v promtool >/dev/null || missing="$$missing prometheus"; \
	[ -z "$$missing" ] || { echo "installing$$missing (test-only)"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; }
	@[ -x "$(VERSITYGW)" ] || { echo "building versitygw $(VERSITYGW_VERSION) into $(VERSITYGW_DIR) (test-only)"; \
		GOBIN="$(VERSITYGW_DIR)" $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION); }
	@[ -x "$(STRIPE_MOCK)" ] || { echo "building stripe-mock $(STRIPE_MOCK_VERSION) into $(STRIPE_MOCK_DIR) (test-only)"; \
		GOBIN="$(STRIPE_MOCK_DIR)" $(GO) install github.com/stripe/stripe-mock@$(STRIPE_MOCK_VERSION); }
	@[ "$(OPENAI_NODE_DIR)/node_modules/.package-lock.json" -nt "$(OPENAI_NODE_DIR)/package-lock.json" ] || { \
		echo "installing the OpenAI Node SDK into $(OPENAI_NODE_DIR) (test-only)"; \
		npm ci --prefix "$(OPENAI_NODE_DIR)" --no-audit --no-fund --loglevel=error; }

bench: build ## load test: SQLite and PostgreSQL beside a bare Fiber handler, and the job queues against the tree before River (a git worktree of it); rewrites its parts of docs/performance.md and prints every figure against its limit
	@command -v wrk >/dev/null || { echo "installing wrk (the load generator)"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; }
	$(GO) build -o bin/videogen-bench ./cmd/videogen-bench
	./bin/videogen-bench -videogen ./$(BIN) -out docs/performance.md

# The figures at size: PostgreSQL seeded with a year of 10,000 accounts (1,000,000 tasks, 20,000,000 call-log rows,
# written by SQL) against an empty database, the same requests on both in one run; a few GB on disk while it runs.
bench-scale: build ## poll, create, console pages, CSV export and staff search on a million tasks against an empty database; rewrites its own region of docs/performance.md
	@command -v wrk >/dev/null || { echo "installing wrk (the load generator)"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; }
	$(GO) build -o bin/videogen-bench ./cmd/videogen-bench
	./bin/videogen-bench -videogen ./$(BIN) -out docs/performance.md -engines scale -duration 5s -runs 3

fuzz: ## run each fuzz target for 30 s
	$(GO) test -run XXX -fuzz FuzzParseCreate -fuzztime 30s ./internal/domain/videos/
	$(GO) test -run XXX -fuzz FuzzParseUSD -fuzztime 30s ./internal/money/
	$(GO) test -run XXX -fuzz FuzzParseByteRange -fuzztime 30s ./handlers/web/
	$(GO) test -run XXX -fuzz FuzzSignerParse -fuzztime 30s ./internal/domain/media/
	$(GO) test -run XXX -fuzz FuzzParseImport -fuzztime 30s ./internal/domain/media/
	$(GO) test -run XXX -fuzz FuzzCheckURL -fuzztime 30s ./internal/infra/mediafetch/

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { gofmt -l .; exit 1; }

fmt:
	gofmt -w .

clean:
	rm -rf bin

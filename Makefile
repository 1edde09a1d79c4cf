# Flotilla's Makefile is the gate: CI runs `make test` and `make lint`
# (see .ci/run). Every target works on a fresh machine with only Go and the
# Go module proxy.

SHELL        := /usr/bin/env bash
.SHELLFLAGS  := -euo pipefail -c
GO           ?= go
BIN          ?= bin
MODULE       := github.com/flotilla-gitops/flotilla
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT       ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS      := -s -w -X $(MODULE)/internal/buildinfo.version=$(VERSION) -X $(MODULE)/internal/buildinfo.commit=$(COMMIT)
TEST_TIMEOUT ?= 45m
# Extra `make run` flags for hack/demo, e.g. make run ARGS="-state-dir /tmp/x".
ARGS         ?=
# Packages with fuzz targets, and how long each target runs in `make fuzz`
# and (briefly) in `make test`. make test counts executions, not seconds: a
# time limit of a few seconds can run out while a loaded machine is still
# replaying the corpus, and Go's fuzzer then fails with "context deadline
# exceeded" although no input failed.
FUZZ_PKGS     := ./internal/webhook ./internal/codec ./internal/cluster ./internal/fleetyaml ./internal/bundle ./internal/api ./internal/chartfetch ./internal/seal ./internal/render
FUZZTIME      ?= 30s
TEST_FUZZTIME ?= 5000x
# Benchmark to run with `make bench BENCH=<name>` (empty: all), and the
# time they may take together (the monorepo benchmark alone takes about
# 70 minutes).
BENCH        ?=
BENCH_TIMEOUT ?= 240m

# Pinned tool versions (installed into $(TOOLS) on first use).
TOOLS                := $(CURDIR)/.tools
WORKFLOWCHECK_VER    := v0.6.0
GOLANGCI_LINT_VER    := v2.15.0

# The end-to-end tests build the worker and CLI binaries in TestMain, which
# go test's result cache cannot see, so those packages always run (-count=1).
# Packages that link the Temporal server run without -race: the race build of
# the server alone costs minutes on a cold cache, and their logic is covered
# by race-enabled unit tests of the packages they call.
# Workflow tests that simulate weeks in workflow time run once more
# without -race (which skips them: it slows the test environment tenfold).
LONG_SIMULATIONS := ^TestGitRepoWorkflow_ThirtyDays$$
SERVER_PKGS := ./tests/... ./internal/devserver/... ./internal/testenv/devtemporal/... ./worker/...

.PHONY: all build run test test-unit test-integration testbin lint bench bench-report clean help fuzz

all: build

help: ## Show this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

build: ## Build bin/flotilla-worker and bin/flotilla
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/flotilla-worker ./worker
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/flotilla ./starter

run: build ## Start the worker (embedded Temporal + UI), a local demo cluster and Git server, and roll out examples/
	@echo "Starting the demo: flotilla-worker --dev (state in .flotilla/), a local cluster, a Git server; the Temporal UI is at http://127.0.0.1:8233"
	FLOTILLA_TESTBIN="$$(bash hack/k8s-testbin/build.sh)"; export FLOTILLA_TESTBIN; \
	$(GO) run ./hack/demo -bin $(BIN) $(ARGS)

.PHONY: crds
crds: ## Regenerate deploy/charts/flotilla/crds/ (Fleet's CRDs) from internal/api's types
	$(GO) run ./hack/crdgen -out deploy/charts/flotilla/crds

testbin: ## Build (once, cached) the kube-apiserver/etcd/kwok binaries tests use
	@bash hack/k8s-testbin/build.sh

test: ## Run every test CI runs: unit (with -race), integration and end-to-end
	FLOTILLA_TESTBIN="$$(bash hack/k8s-testbin/build.sh)"; export FLOTILLA_TESTBIN; \
	FLOTILLA_CHROMIUM="$$(bash hack/chromium.sh)"; export FLOTILLA_CHROMIUM; \
	FLOTILLA_POSTGRES="$$(bash hack/postgres.sh)"; export FLOTILLA_POSTGRES; \
	FLOTILLA_SSHD="$$(bash hack/sshd.sh)"; export FLOTILLA_SSHD; \
	unit=$$($(GO) list ./... | grep -v -E '/(tests|worker|internal/devserver|internal/testenv/devtemporal|internal/testenv/pgtemporal)($$|/)'); \
	$(GO) test -race -timeout $(TEST_TIMEOUT) $$unit; \
	$(GO) test -timeout $(TEST_TIMEOUT) -run '$(LONG_SIMULATIONS)' ./workflows/; \
	$(MAKE) -s fuzz FUZZTIME=$(TEST_FUZZTIME); \
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(SERVER_PKGS)

fuzz: ## Fuzz every parser of untrusted input (FUZZTIME per target, default 30s)
	@# One instrumented test binary per package (go test -c -fuzz), run once
	@# per target in the package's directory: linking is most of the cost.
	@bin=$$(mktemp -d); trap 'rm -rf "$$bin"' EXIT; cache="$$($(GO) env GOCACHE)/fuzz"; \
	for pkg in $(FUZZ_PKGS); do \
		t="$$bin/$$(echo $$pkg | tr ./ __).test"; \
		$(GO) test -c -fuzz=. -o "$$t" $$pkg; \
		for target in $$(cd $$pkg && "$$t" -test.list '^Fuzz'); do \
			echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
			out=$$(cd $$pkg && "$$t" -test.run '^$$' -test.fuzz "^$$target\$$" -test.fuzztime $(FUZZTIME) -test.fuzzcachedir "$$cache" 2>&1) || \
				{ echo "$$out" | grep -v '^fuzz: elapsed'; echo "the failing input is saved under $$pkg/testdata/fuzz/$$target/"; exit 1; }; \
		done; \
	done

.PHONY: test-ui
test-ui: ## Run the browser test of the embedded Temporal UI (installs Chromium if needed)
	FLOTILLA_TESTBIN="$$(bash hack/k8s-testbin/build.sh)"; export FLOTILLA_TESTBIN; \
	FLOTILLA_CHROMIUM="$$(bash hack/chromium.sh)"; export FLOTILLA_CHROMIUM; \
	$(GO) test -count=1 -timeout 15m -run '^TestTemporalUI' -v ./tests/

test-unit: ## Run only the fast tests (-short skips tests that start servers)
	$(GO) test -short -race ./...

lint: $(TOOLS)/workflowcheck ## gofmt, go vet, workflowcheck and golangci-lint
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS)/workflowcheck ./workflows/...
	@$(MAKE) -s $(TOOLS)/golangci-lint || { \
		echo "make lint: FAILED: golangci-lint $(GOLANGCI_LINT_VER) could not be installed into $(TOOLS) from the Go module proxy (see the go install error above); lint does not pass without it" >&2; \
		exit 1; }
	$(TOOLS)/golangci-lint run ./...

$(TOOLS)/workflowcheck:
	GOBIN=$(TOOLS) $(GO) install go.temporal.io/sdk/contrib/tools/workflowcheck@$(WORKFLOWCHECK_VER)

$(TOOLS)/golangci-lint:
	GOBIN=$(TOOLS) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VER)

bench: ## Run benchmarks (BENCH=<name> for one); results in bench/out/<name>.json
	mkdir -p bench/out
	export FLOTILLA_TESTBIN="$$(bash hack/k8s-testbin/build.sh)" FLOTILLA_POSTGRES="$$(bash hack/postgres.sh)" FLOTILLA_SSHD="$$(bash hack/sshd.sh)" FLOTILLA_BENCH_OUT="$(CURDIR)/bench/out"; \
	$(GO) test -run '^$$' -bench '$(if $(BENCH),(?i)^Benchmark$(BENCH)$$,.)' -benchtime 1x -timeout $(BENCH_TIMEOUT) ./tests/...

bench-report: ## One self-contained HTML page of bench/out/*.json (plots, tables): bench/out/report.html
	$(GO) run ./hack/benchreport -in bench/out -out bench/out/report.html

clean: ## Remove build output and tools (not the cached test binaries)
	rm -rf $(BIN) $(TOOLS) bench/out

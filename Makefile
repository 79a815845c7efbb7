# Targets need only Go and make (plus bash); tools are installed on demand.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

GO ?= go
# Prints the directory of the control-plane binaries, building them if needed.
CONTROLPLANE_BUILD := test/controlplane/build.sh
BIN := $(CURDIR)/bin
GOLANGCI_LINT_VERSION := v2.15.0
# Keyed by version, so that changing the version installs the new one.
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint

.PHONY: build
build: ## Build every package.
	$(GO) build ./...

.PHONY: controlplane
controlplane: ## Build kube-apiserver, etcd and kubectl into the cache (once) and print their directory.
	@$(CONTROLPLANE_BUILD)

# The binary that `make run` builds: the app with its local command, which
# only -tags local builds have, as it links envtest. It is built, then run,
# rather than `go run`: an interrupted `go run` exits 1 whatever the app's
# exit code, and Ctrl-C then ended in make's "Error 1".
LOCAL_APP := $(BIN)/fxkube-local

.PHONY: run
run: ## Run the example modules on a local control plane (built first if missing) until Ctrl-C.
	@assets=$$($(CONTROLPLANE_BUILD)); \
	$(GO) build -tags local -o $(LOCAL_APP) ./cmd/app; \
	exec $(LOCAL_APP) local --controlplane-dir "$$assets" --log-format console $(ARGS)

.PHONY: test
test: ## Run all tests, integration tests included, with the race detector.
	@assets=$$($(CONTROLPLANE_BUILD)); \
	echo "KUBEBUILDER_ASSETS=$$assets"; \
	KUBEBUILDER_ASSETS=$$assets $(GO) test -race -tags local -timeout 20m ./...

# Runs of each benchmark in `make bench`; the table shows medians.
BENCH_COUNT ?= 3

.PHONY: bench
bench: ## Benchmark fxkube against controller-runtime and plain informers on a local control plane; print a table of ratios.
	@assets=$$($(CONTROLPLANE_BUILD)); \
	echo "KUBEBUILDER_ASSETS=$$assets"; \
	KUBEBUILDER_ASSETS=$$assets $(GO) test -run '^$$' -bench . -count $(BENCH_COUNT) -timeout 60m ./bench

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint, go vet and a gofmt check.
	$(GO) vet ./...
	@unformatted=$$(gofmt -l .); \
	if [[ -n $$unformatted ]]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GOLANGCI_LINT) run ./...

$(GOLANGCI_LINT):
	GOBIN=$(dir $@) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: tidy-check
tidy-check: ## Fail if `go mod tidy` would change go.mod or go.sum (both modules).
	$(GO) mod tidy -diff
	cd test/controlplane && $(GO) mod tidy -diff

.PHONY: help
help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{ printf "%-14s %s\n", $$1, $$2 }'

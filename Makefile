# taoflow — build, test and check. `make check` is what CI runs.
GO        ?= go
BIN       := bin
GOLANGCI_VERSION := v2.15.0
GOLANGCI  := $(shell $(GO) env GOPATH)/bin/golangci-lint
# Fuzzing budgets as input counts, not durations: a duration's deadline can
# expire while a busy worker is being stopped, failing a run that found nothing.
DEADCODE := golang.org/x/tools/cmd/deadcode@v0.52.0
FUZZ_LOAD ?= 30000x
FUZZ_TEMPLATE ?= 100000x
FUZZ_QUOTE ?= 4000x
FUZZ_PLACEMENT ?= 100000x
FUZZ_REDACT ?= 30000x
FUZZ_BREV ?= 30000x
FUZZ_LINT ?= 30000x
FUZZ_JSONVIEW ?= 3000x
FUZZ_PROGRESS ?= 30000x
PKGS      := ./...

.PHONY: all build install test race fuzz bench bench-deps lint check tools deps tidy fmt examples clean

# What the tests run for real: an OpenSSH server, a Docker registry with
# htpasswd auth, the AWS CLI, an S3 gateway (versitygw) and a single-node
# Slurm cluster (slurm-wlm, munge) and a headless browser (chromium) for the
# web UI's tests. The Docker Engine itself must already be running.
DEB_DEPS  := openssh-server openssh-client netcat-openbsd docker-registry awscli apache2-utils shellcheck slurm-wlm munge chromium
VERSITYGW := github.com/versity/versitygw/cmd/versitygw@v1.8.0
# What the benchmarks also run: the peers they are compared with (rsync,
# make, go-task) and strace, which counts a job's processes.
BENCH_DEB := rsync strace make
TASK      := github.com/go-task/task/v3/cmd/task@v3.54.0

all: build

build:
	$(GO) build -o $(BIN)/taoflow ./cmd/taoflow

## install: build and install taoflow into BINDIR: $(PREFIX)/bin when PREFIX
## is given (make install PREFIX=/usr/local), else $(go env GOPATH)/bin
PREFIX    ?=
BINDIR    ?= $(if $(PREFIX),$(PREFIX)/bin,$(shell $(GO) env GOPATH)/bin)
install: build
	install -d "$(DESTDIR)$(BINDIR)"
	install -m 0755 $(BIN)/taoflow "$(DESTDIR)$(BINDIR)/taoflow"
	@echo "installed $(DESTDIR)$(BINDIR)/taoflow"
	@case ":$$PATH:" in *":$(BINDIR):"*) ;; \
	*) echo "$(BINDIR) is not on your PATH: add it, e.g. in ~/.bashrc or ~/.profile:"; \
	   echo "  export PATH=\"$(BINDIR):\$$PATH\"";; esac

## test: every test, with the race detector (what README calls the test command)
test: deps
	$(GO) test -race -count=1 -timeout 45m $(PKGS)

## deps: install what the tests start (Debian packages, versitygw); a no-op when present
deps:
	@missing=""; for p in $(DEB_DEPS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
	@command -v versitygw >/dev/null 2>&1 || [ -x "$$($(GO) env GOPATH)/bin/versitygw" ] || \
		{ echo "installing versitygw (a few minutes)"; $(GO) install $(VERSITYGW); }

## fuzz: each fuzz target briefly (about 10 s each here)
fuzz:
	$(GO) test ./plan -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZ_LOAD)
	$(GO) test ./plan -run '^$$' -fuzz '^FuzzTemplate$$' -fuzztime $(FUZZ_TEMPLATE)
	$(GO) test ./plan -run '^$$' -fuzz '^FuzzExpressionPlacement$$' -fuzztime $(FUZZ_PLACEMENT)
	$(GO) test ./internal/shellquote -run '^$$' -fuzz '^FuzzQuote$$' -fuzztime $(FUZZ_QUOTE)
	$(GO) test ./secret -run '^$$' -fuzz '^FuzzRedact$$' -fuzztime $(FUZZ_REDACT)
	$(GO) test ./platform/brev -run '^$$' -fuzz '^FuzzParseExecOutput$$' -fuzztime $(FUZZ_BREV)
	$(GO) test ./platform/brev -run '^$$' -fuzz '^FuzzParseList$$' -fuzztime $(FUZZ_BREV)
	$(GO) test ./platform/brev -run '^$$' -fuzz '^FuzzParseSearch$$' -fuzztime $(FUZZ_BREV)
	$(GO) test ./secret -run '^$$' -fuzz '^FuzzLint$$' -fuzztime $(FUZZ_LINT)
	$(GO) test ./plan -run '^$$' -fuzz '^FuzzJSONView$$' -fuzztime $(FUZZ_JSONVIEW)
	$(GO) test ./internal/progress -run '^$$' -fuzz '^FuzzParseLine$$' -fuzztime $(FUZZ_PROGRESS)
	@# Every fuzz target of the tree is run above: a new one must be added.
	@missing=""; for f in $$(grep -rhoE '^func Fuzz[A-Za-z0-9_]+' --include='*_test.go' . | sed 's/^func //' | sort -u); do \
		grep -q -- "-fuzz '^$$f\$$\$$'" Makefile || missing="$$missing $$f"; done; \
	if [ -n "$$missing" ]; then echo "make fuzz does not run:$$missing (add a line to the fuzz target)"; exit 1; fi

## bench: benchmarks that print figures (no test asserts on speed); see docs/benchmarks.md
# BENCH_SIZE=medium runs the real-size benchmarks (cmd/taoflow size_test.go)
# at a tenth of issue 21's sizes, for a busy or small machine.
BENCH_SIZE ?= full
bench: deps bench-deps
	TAOFLOW_BENCH_SIZE=$(BENCH_SIZE) $(GO) test -run '^$$' -timeout 60m -bench . -benchmem ./plan ./engine ./internal/dag ./internal/provenance ./secret ./state ./platform/... ./steps ./cmd/taoflow

## bench-deps: install the benchmarks' peers and tools (Debian packages, go-task)
bench-deps:
	@missing=""; for p in $(BENCH_DEB); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
	@command -v task >/dev/null 2>&1 || [ -x "$$($(GO) env GOPATH)/bin/task" ] || \
		{ echo "installing go-task"; $(GO) install $(TASK); }

## lint: formatting, vet, golangci-lint (import direction), shellcheck of the remote scripts, go.mod tidiness, example plans
lint: tools deps
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GOLANGCI) run $(PKGS)
	shellcheck -s sh steps/scripts/*.sh
	$(GO) mod tidy -diff
	@# Dead code: a function nothing reaches (tests count as callers).
	@out=$$($(GO) run $(DEADCODE) -test $(PKGS)); if [ -n "$$out" ]; then echo "deadcode: unreachable functions:"; echo "$$out"; exit 1; fi
	@# Docs name what exists: doc.go identifiers and files, `pkg.Name` in docs/*.md.
	$(GO) test -count=1 ./internal/doccheck
	$(MAKE) examples

## examples: every example plan validates
examples: build
	$(BIN)/taoflow validate examples/plans/*.yaml

check: lint test fuzz

tools:
	@if ! $(GOLANGCI) version 2>/dev/null | grep -q "$(patsubst v%,%,$(GOLANGCI_VERSION))"; then \
		echo "installing golangci-lint $(GOLANGCI_VERSION)"; \
		$(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION); \
	fi

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)

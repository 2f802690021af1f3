# taoflow — build, test and check. `make check` is what CI runs.
GO        ?= go
BIN       := bin
GOLANGCI_VERSION := v2.15.0
GOLANGCI  := $(shell $(GO) env GOPATH)/bin/golangci-lint
FUZZTIME  ?= 10s
PKGS      := ./...

.PHONY: all build test race fuzz bench lint check tools tidy fmt examples clean

all: build

build:
	$(GO) build -o $(BIN)/taoflow ./cmd/taoflow

## test: every test, with the race detector (what README calls the test command)
test:
	$(GO) test -race -count=1 $(PKGS)

## fuzz: each fuzz target briefly (FUZZTIME per target)
fuzz:
	$(GO) test ./plan -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME)
	$(GO) test ./plan -run '^$$' -fuzz '^FuzzTemplate$$' -fuzztime $(FUZZTIME)
	$(GO) test ./plan -run '^$$' -fuzz '^FuzzShellQuote$$' -fuzztime $(FUZZTIME)
	$(GO) test ./secret -run '^$$' -fuzz '^FuzzRedact$$' -fuzztime $(FUZZTIME)

## bench: benchmarks that print figures (no test asserts on speed)
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./plan ./engine/... ./secret ./state

## lint: formatting, vet, golangci-lint (import direction), go.mod tidiness, example plans
lint: tools
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GOLANGCI) run $(PKGS)
	$(GO) mod tidy -diff
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

# agentsandbox: `make demo` runs the whole system, `make test` runs every test.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
BIN := bin

.PHONY: all build deps lint test demo golden-check clean

all: build

deps:
	@scripts/install-deps.sh

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# lint: go vet and staticcheck (pinned; scripts/staticcheck.sh installs it) stay clean.
lint:
	$(GO) vet ./...
	scripts/staticcheck.sh

test: deps lint
	$(GO) test -race -count=1 -timeout 30m ./...

demo: deps build
	scripts/demo.sh

# golden-check: ajv (the JS SDK's validator) and the Go validator still agree on the golden corpus.
golden-check:
	scripts/golden-check.sh

clean:
	rm -rf $(BIN)

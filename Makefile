# agentsandbox: `make demo` runs the whole system, `make test` runs every test.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
BIN := bin
# The version stamped into every build (--version, the check-in, the build-info
# metrics) and carried by the Debian packages: scripts/version.sh.
VERSION := $(shell scripts/version.sh)
LDFLAGS := -X openvibe.network/agentsandbox/internal/buildinfo.version=$(VERSION)

.PHONY: all build deps lint test demo golden-check clean vm-deps vm-test cross-arm64 deb deb-check

all: build

deps:
	@scripts/install-deps.sh

# build: the commands as the DEB ships them (static, stripped: scripts/gobuild.sh).
build:
	GOBUILD_LDFLAGS='$(LDFLAGS)' scripts/gobuild.sh $(BIN) ./cmd/...

# lint: go vet and staticcheck (pinned; scripts/staticcheck.sh installs it) stay clean.
lint:
	$(GO) vet ./...
	scripts/staticcheck.sh

# test: the host's suites (every package but vmtest/), then the guest suites.
# The guest runs on its own so that its two emulated CPUs do not compete with
# the host tests' time bounds.
test: deps lint
	$(GO) test -race -count=1 -timeout 30m $$($(GO) list ./... | grep -v '/vmtest$$')
	$(MAKE) vm-test

vm-deps:
	@scripts/vm/deps.sh

# vm-test: the sandbox suites, the self-test and the e2e test in a real
# cgroup-v2-only Linux guest under qemu, and a systemd guest (docs/hosts.md).
vm-test: vm-deps
	$(GO) test -count=1 -v -timeout 25m ./vmtest/

# cross-arm64: every package type-checks, and both commands build, for linux/arm64.
cross-arm64:
	GOOS=linux GOARCH=arm64 $(GO) vet ./...
	GOOS=linux GOARCH=arm64 $(GO) build -o /dev/null ./cmd/...

demo: deps build
	scripts/demo.sh

# golden-check: ajv (the JS SDK's validator) and the Go validator still agree on the golden corpus.
golden-check:
	scripts/golden-check.sh

# deb: the Debian packages codes-sandbox and ovlive in dist/, built with nfpm
# (pinned; scripts/deb.sh installs it) from packaging/*.yaml.
deb:
	scripts/deb.sh

# deb-check: lintian passes both packages with no error or warning, and their
# file lists are packaging/expected/*.txt.
deb-check: deb
	scripts/deb-check.sh

clean:
	rm -rf $(BIN) dist

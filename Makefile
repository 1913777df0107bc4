# agentsandbox: `make demo` runs the whole system, `make test` runs every test.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
BIN := bin
# The version stamped into every build (--version, the check-in, the build-info
# metrics) and carried by the Debian packages: scripts/version.sh.
VERSION := $(shell scripts/version.sh)
LDFLAGS := -X openvibe.network/agentsandbox/internal/buildinfo.version=$(VERSION)

.PHONY: all build deps lint test sdk-test demo golden-check clean vm-deps vm-test cross-arm64 deb deb-check image podman-test k8s-manifests k8s-check

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

# test: the host's suites (every package but vmtest/ and podmantest/), the
# SDKs', the Helm chart's checks, then the guest suites. The guest runs on its
# own so that its two emulated CPUs do not compete with the host tests' time
# bounds.
# (podmantest/ needs the images: make podman-test, which .ci/run runs.)
test: deps lint
	$(GO) test -race -count=1 -timeout 30m $$($(GO) list ./... | grep -v -e '/vmtest$$' -e '/podmantest$$')
	$(MAKE) sdk-test
	$(MAKE) k8s-check
	$(MAKE) vm-test

# sdk-test: the Python and TypeScript SDKs' suites, once each, against one
# real worker (scripts/sdk-test.sh).
sdk-test: deps
	scripts/sdk-test.sh

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

# image: OCI image archives of the worker (and Live) in dist/, from Debian's
# packages and the .debs, no base image from a registry (scripts/image.sh;
# IMAGES="codes-sandbox-browser" scripts/image.sh adds Chromium).
image: deb
	scripts/image.sh

# podman-test: the images under podman (with runc) prove the worker's least
# privilege, deploy/kubernetes/agentsandbox/files/security.json, and what it
# says without it (podmantest/, docs/kubernetes.md).
podman-test: image vm-deps
	@scripts/install-deps.sh podman
	$(GO) test -count=1 -v -timeout 20m ./podmantest/

# The chart's committed manifests are rendered with these.
K8S_TEMPLATE := template agentsandbox deploy/kubernetes/agentsandbox --namespace agentsandbox \
	--kube-version 1.33.0 --values deploy/kubernetes/values-example.yaml

# k8s-manifests: renders deploy/kubernetes/manifests/agentsandbox.yaml from
# the chart (helm built from its Go module, pinned: scripts/helm.sh).
k8s-manifests:
	scripts/helm.sh $(K8S_TEMPLATE) >deploy/kubernetes/manifests/agentsandbox.yaml

# k8s-check: helm lint, then the chart's module (deploy/kubernetes): every
# rendered object decoded strictly with the Kubernetes API's types, the
# committed manifests current, the DaemonSet's security context the proved one.
k8s-check:
	scripts/helm.sh lint --strict deploy/kubernetes/agentsandbox --values deploy/kubernetes/values-example.yaml
	cd deploy/kubernetes && $(GO) vet ./... && HELM=$$(../../scripts/helm.sh) $(GO) test -count=1 ./...

clean:
	rm -rf $(BIN) dist

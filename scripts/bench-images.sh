#!/usr/bin/env bash
# Measures image sandboxes, each comparison interleaved in one run so that
# both sides see the same machine load, and prints the medians and ratios:
#   1. create from a cached image (the Debian test image) vs a host-view
#      create, no pool (target: image/host p50 <= 1.2);
#   2. a pooled image create vs a pooled host-view create;
#   3. pull + unpack of the Debian test image into an empty store vs
#      `skopeo copy` + `umoci unpack` of it, from the same loopback registry
#      (target: <= 1.0);
#   4. 50 concurrent creates of one uncached image through the API: all
#      answered, one pull (the benchmark fails otherwise).
# Needs root, bubblewrap, cgroups, docker-registry, skopeo and umoci
# (scripts/install-deps.sh) and builds the Debian test image once
# (scripts/build-test-image.sh).
# Usage: scripts/bench-images.sh [CREATES] [PULLS]   (defaults: 40 creates, 3 pulls)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH CI=${CI:-true}
creates=${1:-40}
pulls=${2:-3}
scripts/install-deps.sh
scripts/build-test-image.sh >/dev/null
echo "== create: cached image vs host view; pooled image vs pooled ($creates each, interleaved)"
go test -count=1 -run '^$' -bench 'BenchmarkCreateImageVsHost|BenchmarkCreatePooledImageVsPooled' -benchtime "${creates}x" ./sandbox/ |
	grep -E '^Benchmark'
echo "== pull + unpack of the Debian test image vs skopeo copy + umoci unpack ($pulls each, interleaved)"
go test -count=1 -run '^$' -bench 'BenchmarkPullVsSkopeoUmoci' -benchtime "${pulls}x" -timeout 60m ./image/ | grep -E '^Benchmark'
echo "== 50 concurrent creates of one uncached image (one pull, or the benchmark fails)"
go test -count=1 -run '^$' -bench 'BenchmarkRealImageCreates50' -benchtime 1x ./worker/httpapi/ | grep -E '^Benchmark|FAIL|pulls'

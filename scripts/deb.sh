#!/usr/bin/env bash
# Builds the Debian packages codes-sandbox and ovlive into dist/ with nfpm
# (pinned below; installed once, with go install, into a cache outside the
# repository), from packaging/codes-sandbox.yaml and packaging/ovlive.yaml.
# The binaries are built here with the version of scripts/version.sh stamped
# in (what --version prints), which is also the packages' version (with the
# Debian revision -1). GOARCH=arm64 builds the arm64 packages.
# DEB_MAINTAINER overrides the Maintainer field; DEB_OUT the directory the
# packages go to (default dist/; the binaries are staged in its stage/).
# Usage: scripts/deb.sh        (prints the paths of the two .deb files)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

nfpm_version=v2.48.0
cache=${AGENTSANDBOX_CACHE:-/var/cache/agentsandbox}
[ -w "$(dirname "$cache")" ] || [ -w "$cache" ] || cache=${XDG_CACHE_HOME:-$HOME/.cache}/agentsandbox
nfpm=$cache/nfpm-$nfpm_version/nfpm
if [ ! -x "$nfpm" ]; then
	mkdir -p "$(dirname "$nfpm")"
	echo "deb.sh: installing nfpm $nfpm_version into $(dirname "$nfpm")" >&2
	GOBIN=$(dirname "$nfpm") go install "github.com/goreleaser/nfpm/v2/cmd/nfpm@$nfpm_version"
fi

DEB_VERSION=$(scripts/version.sh)
DEB_ARCH=$(go env GOARCH)
DEB_MAINTAINER=${DEB_MAINTAINER:-agentsandbox maintainers <maintainers@openvibe.network>}
out=${DEB_OUT:-dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
STAGE=$out/stage
export DEB_VERSION DEB_ARCH DEB_MAINTAINER STAGE
rm -rf "$STAGE"
mkdir -p "$STAGE"

# Static, stripped binaries (scripts/gobuild.sh). codes-sandbox-init must
# come from the same build as codes-sandbox, or the worker does not use it.
GOBUILD_LDFLAGS="-X openvibe.network/agentsandbox/internal/buildinfo.version=$DEB_VERSION" \
	scripts/gobuild.sh "$STAGE" ./cmd/codes-sandbox ./cmd/codes-sandbox-worker ./cmd/codes-sandbox-init ./cmd/ovlive

# changelog.Debian.gz: one entry for this build, dated by its commit (the
# project's own history is CHANGELOG.md).
when=$(git log -1 --format=%cD 2>/dev/null || date -R)
rev=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
for pkg in codes-sandbox ovlive; do
	printf '%s (%s-1) unstable; urgency=medium\n\n  * Built from agentsandbox %s,\n    revision %s. What changed: the project'"'"'s CHANGELOG.md.\n\n -- %s  %s\n' \
		"$pkg" "$DEB_VERSION" "$DEB_VERSION" "$rev" "$DEB_MAINTAINER" "$when" |
		gzip -9n >"$STAGE/$pkg.changelog.Debian.gz"
done

for pkg in codes-sandbox ovlive; do
	rm -f "$out/${pkg}_"*.deb
	"$nfpm" package --config "packaging/$pkg.yaml" --packager deb --target "$out/" >&2
done
ls "$out"/codes-sandbox_*.deb "$out"/ovlive_*.deb

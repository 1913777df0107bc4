#!/usr/bin/env bash
# Prints the version that builds are stamped with (-ldflags -X
# .../internal/buildinfo.version, what --version prints) and that the Debian
# packages carry, in a form that is a valid Debian upstream version:
#
#   at a tag vX.Y.Z            X.Y.Z
#   after it (or untagged)     X.Y.Z+gitYYYYMMDDhhmmss.HASH   (the commit's UTC time and short hash)
#   uncommitted changes        ... +dirty at the end
#   no git at all              the VERSION file as it is
#
# X.Y.Z is the nearest tag v* reachable from HEAD, else the VERSION file (the
# last release). The commit time makes snapshots sort in the order they were
# made, whether or not a tag exists yet, and after the release they follow.
# Usage: scripts/version.sh
set -euo pipefail
cd "$(dirname "$0")/.."
base=$(tr -d ' \n' <VERSION)
if ! git rev-parse --git-dir >/dev/null 2>&1; then
	printf '%s\n' "$base"
	exit 0
fi
if tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null); then
	base=${tag#v}
fi
v=$base
if [[ -z ${tag:-} ]] || [[ $(git rev-list -n1 "$tag") != $(git rev-parse HEAD) ]]; then
	v+="+git$(TZ=UTC0 git log -1 --date=format-local:%Y%m%d%H%M%S --format=%cd).$(git rev-parse --short=7 HEAD)"
fi
if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
	if [[ $v == *+* ]]; then v+=.dirty; else v+=+dirty; fi
fi
# A Debian upstream version: starts with a digit; letters, digits and . + ~ only.
[[ $v =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || { echo "version.sh: $v is not a Debian upstream version" >&2; exit 1; }
printf '%s\n' "$v"

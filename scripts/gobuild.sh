#!/usr/bin/env bash
# gobuild.sh OUT_DIR PKG...: builds commands, in the current directory's
# module, the way they ship: static (CGO_ENABLED=0: no dynamic loader and
# libc to map at each start, which for the worker means each `run` and, for
# the lean init, each sandbox), without the build machine's paths
# (-trimpath), stripped (-s -w: no symbol table or DWARF; the build
# information that --version and the lean init's same-build check read
# stays). GOBUILD_LDFLAGS adds linker flags (the version stamp);
# GOBUILD_SYMBOLS=1 keeps the symbol table, for a profiler to name the
# functions (scripts/profile-run.sh). The DEB, `make build`, the guests'
# commands (internal/vmtest) and every benchmark that times a start use it,
# so what is measured is what is installed.
set -euo pipefail
out=${1:?usage: scripts/gobuild.sh OUT_DIR PKG...}
shift
[[ $# -gt 0 ]] || { echo "usage: scripts/gobuild.sh OUT_DIR PKG..." >&2; exit 2; }
export PATH=/usr/local/go/bin:$PATH
strip="-s -w"
[[ "${GOBUILD_SYMBOLS:-}" == 1 ]] && strip=""
CGO_ENABLED=0 exec go build -trimpath -buildvcs=auto -ldflags "$strip ${GOBUILD_LDFLAGS:-}" -o "$out/" "$@"

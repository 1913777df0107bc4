#!/usr/bin/env bash
# Installs the Debian packages that `make test` and `make demo` need (with
# the argument podman: those of make podman-test), only when something is
# missing. Run as root on a fresh Debian machine.
set -euo pipefail

# command -> package
declare -A need=(
  [bwrap]=bubblewrap
  [ip]=iproute2
  [chromium]=chromium
  [curl]=curl
  [python3]=python3
  [perl]=perl
  [git]=git
  # the image store's tests: a registry on loopback, a static busybox for the
  # tiny image, mmdebstrap for the Debian one; skopeo and umoci for its benchmark
  [docker-registry]=docker-registry
  [busybox]=busybox-static
  [mmdebstrap]=mmdebstrap
  [skopeo]=skopeo
  [umoci]=umoci
)
# `install-deps.sh podman`: what make podman-test needs instead (podman, and
# runc, which it runs the containers with: what containerd runs on a node).
if [ "${1:-}" = podman ]; then
  need=([podman]=podman [runc]=runc)
fi
missing=()
for cmd in "${!need[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${need[$cmd]}")
done
# The Python SDK's suite (make sdk-test) runs on Debian's python3 with
# Debian's httpx, websockets and pytest.
if ! /usr/bin/python3 -c 'import httpx, websockets, pytest' >/dev/null 2>&1; then
  missing+=(python3-httpx python3-websockets python3-pytest)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing packages: ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
  { apt-get update >/dev/null && apt-get install -y --no-install-recommends "${missing[@]}"; }

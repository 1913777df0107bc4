#!/usr/bin/env bash
# Installs the Debian packages that `make test` and `make demo` need, only
# when something is missing. Run as root on a fresh Debian machine.
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
)
missing=()
for cmd in "${!need[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${need[$cmd]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing packages: ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
  { apt-get update >/dev/null && apt-get install -y --no-install-recommends "${missing[@]}"; }

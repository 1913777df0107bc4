#!/usr/bin/env bash
# Builds the root file system of the Debian test image once, from Debian's
# packages only (mmdebstrap, minbase + python3 + pip), and prints the path of
# its gzipped tar (a layer as a registry serves it); the sha256 of the tar
# itself (the layer's diff ID) is in the file beside it, named .diffid. Cached under /var/cache/agentsandbox/images (AGENTSANDBOX_CACHE
# overrides the first part), like scripts/vm caches the guest's kernel: a
# second run prints the cached path at once.
#
# The image is what an agent's Python image looks like: python3 and pip, no
# PEP 668 marker (pip installs into the system's site-packages, as in the
# python:3 images), running as root. It carries two local packages for the
# tests, built here without any index:
#   /opt/wheels/agentsandbox_hello-1.0-py3-none-any.whl  (import agentsandbox_hello)
#   /opt/debs/agentsandbox-hello_1.0_all.deb             (installs /usr/share/agentsandbox-hello/hello)
# Only Debian's mirror is reached (deb.debian.org, as the host's apt is set up).
set -euo pipefail

cache=${AGENTSANDBOX_CACHE:-/var/cache/agentsandbox}/images
suite=bookworm
packages=python3,python3-pip
version=1 # bump when what the image holds changes
key=$(printf '%s %s %s %s' "$suite" "$packages" "$version" "$(uname -m)" | sha256sum | cut -c1-16)
out=$cache/debian-python-$key.tar.gz
if [ -s "$out" ] && [ -s "${out%.tar.gz}.diffid" ]; then
  echo "$out"
  exit 0
fi
if ! command -v mmdebstrap >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "build-test-image: mmdebstrap is not installed (apt-get install mmdebstrap)" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mmdebstrap >/dev/null ||
    { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mmdebstrap >/dev/null; }
fi
mkdir -p "$cache"
tmp=$(mktemp "$cache/.build-XXXXXX.tar")
trap 'rm -f "$tmp" "$tmp.gz"' EXIT

# The local wheel and .deb, made in the customize hook ($1 is the root).
read -r -d '' extras <<'EOF' || true
set -e
root=$1
mkdir -p "$root/opt/wheels" "$root/opt/debs"
python3 - "$root/opt/wheels/agentsandbox_hello-1.0-py3-none-any.whl" <<'PY'
import base64, hashlib, sys, zipfile
files = {
    "agentsandbox_hello/__init__.py": "def greet():\n    return 'hello from a local wheel'\n",
    "agentsandbox_hello-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: agentsandbox-hello\nVersion: 1.0\n",
    "agentsandbox_hello-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: agentsandbox\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for name, text in files.items():
        data = text.encode()
        z.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("agentsandbox_hello-1.0.dist-info/RECORD,,")
    z.writestr(zipfile.ZipInfo("agentsandbox_hello-1.0.dist-info/RECORD", (2020, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
PY
pkg=$(mktemp -d)
mkdir -p "$pkg/DEBIAN" "$pkg/usr/share/agentsandbox-hello"
printf 'Package: agentsandbox-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: agentsandbox <dev@openvibe.network>\nDescription: a local package for the image tests\n' >"$pkg/DEBIAN/control"
echo "hello from a local deb" >"$pkg/usr/share/agentsandbox-hello/hello"
dpkg-deb --root-owner-group -b "$pkg" "$root/opt/debs/agentsandbox-hello_1.0_all.deb" >/dev/null
rm -rf "$pkg"
rm -f "$root"/usr/lib/python3*/EXTERNALLY-MANAGED
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
EOF

mmdebstrap --variant=minbase --include="$packages" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --customize-hook="$extras" \
  "$suite" "$tmp" >&2
sha256sum <"$tmp" | cut -d' ' -f1 >"${out%.tar.gz}.diffid"
gzip -6 "$tmp"
chmod 0644 "$tmp.gz"
mv "$tmp.gz" "$out"
trap - EXIT
echo "$out"

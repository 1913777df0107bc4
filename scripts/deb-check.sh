#!/usr/bin/env bash
# Checks the Debian packages that scripts/deb.sh left in dist/: lintian
# (installed with apt-get when missing) must report no error and no warning
# (what is accepted on purpose is overridden, with its reason, in
# packaging/lintian/), and each package's list of files must be the one in
# packaging/expected/PACKAGE.txt, so that a file added, moved or lost shows
# as a diff. After a change on purpose: scripts/deb-check.sh --update.
# Usage: scripts/deb-check.sh [--update]
set -euo pipefail
cd "$(dirname "$0")/.."
update=false
[[ ${1:-} == --update ]] && update=true

if ! command -v lintian >/dev/null 2>&1; then
	if [[ $(id -u) != 0 ]]; then
		echo "deb-check: lintian is missing; run as root or: sudo apt-get install -y lintian" >&2
		exit 1
	fi
	echo "deb-check: installing lintian" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y --no-install-recommends lintian >/dev/null 2>&1 ||
		{ apt-get update >/dev/null && apt-get install -y --no-install-recommends lintian >/dev/null; }
fi

debs=()
for pkg in codes-sandbox ovlive; do
	f=(dist/"${pkg}"_*.deb)
	[[ ${#f[@]} == 1 && -f ${f[0]} ]] || { echo "deb-check: want one dist/${pkg}_*.deb, found: ${f[*]}; run make deb" >&2; exit 1; }
	debs+=("${f[0]}")
done

failed=false
# --fail-on: warnings fail too. lintian refuses nothing as root, but says so
# on every run: that line is dropped.
if ! lintian --fail-on error,warning "${debs[@]}" 2> >(grep -v 'running with root privileges' >&2); then
	echo "deb-check: lintian: not clean (see above; fix it, or override it with its reason in packaging/lintian/)" >&2
	failed=true
fi

for deb in "${debs[@]}"; do
	pkg=$(dpkg-deb -f "$deb" Package)
	want=packaging/expected/$pkg.txt
	got=$(dpkg-deb --fsys-tarfile "$deb" | tar -t | LC_ALL=C sort)
	if $update; then
		printf '%s\n' "$got" >"$want"
		echo "deb-check: wrote $want"
	elif ! diff -u "$want" <(printf '%s\n' "$got") >&2; then
		echo "deb-check: $pkg: its files differ from $want (- expected, + built); if on purpose: scripts/deb-check.sh --update" >&2
		failed=true
	fi
done
if $failed; then
	exit 1
fi
echo "deb-check: lintian clean, file lists as expected: ${debs[*]}"

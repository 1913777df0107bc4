#!/usr/bin/env bash
# Builds OCI image archives of the worker and of Live into dist/, from
# Debian's packages and our own .debs, with no base image from a registry:
#
#   codes-sandbox           the worker (codes-sandbox, -worker, -init, bubblewrap)
#   codes-sandbox-browser   the same with Debian's chromium (browser sandboxes)
#   ovlive                  Live, run as its non-root user ovlive
#
# Each image has two layers. The first is Debian's packages, built by
# mmdebstrap (the essential set, merged /usr, no apt, no documentation but
# the copyright files) and cached in $AGENTSANDBOX_CACHE/image-build (default
# /var/cache/agentsandbox/image-build) with the .debs it downloaded, so the next
# build takes seconds; it is built anew when its recipe changes or it is
# older than IMAGE_BASE_MAX_AGE_DAYS (default 7, for security updates).
# The second is our .deb installed with dpkg (umoci unpack, dpkg -i, umoci
# repack). The image's config carries the OCI labels (version, revision,
# created, source, licenses); an SPDX 2.3 SBOM of every installed package is
# in the image (/usr/share/doc/agentsandbox-image/sbom.spdx.json) and beside
# it (dist/NAME.sbom.spdx.json), with the plain package list (NAME.packages.txt).
#
# Usage: scripts/image.sh [NAME...]   (default: codes-sandbox ovlive; prints the archives' paths)
# The .debs come from DEB_DIR (default dist/: `make deb`); archives go to
# IMAGE_OUT (default dist/) as NAME.oci.tar, loaded with `podman load -i`,
# `ctr -n k8s.io images import` or pushed with `skopeo copy oci-archive:…`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

[ "$(id -u)" = 0 ] || { echo "image.sh: run as root (mmdebstrap and dpkg build the root file systems)" >&2; exit 1; }
for tool in mmdebstrap:mmdebstrap umoci:umoci jq:jq; do
	command -v "${tool%%:*}" >/dev/null 2>&1 && continue
	echo "image.sh: installing ${tool#*:}" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${tool#*:}" >/dev/null 2>&1 ||
		{ apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${tool#*:}"; }
done

images=("$@")
[ ${#images[@]} -gt 0 ] || images=(codes-sandbox ovlive)
suite=bookworm
arch=$(dpkg --print-architecture)
version=$(scripts/version.sh)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
created=$(TZ=UTC0 git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)
# An OCI tag may not hold the version's "+": it becomes "-".
tag=${version//+/-}
debdir=${DEB_DIR:-dist}
out=${IMAGE_OUT:-dist}
cache=${AGENTSANDBOX_CACHE:-/var/cache/agentsandbox}/image-build
max_age=${IMAGE_BASE_MAX_AGE_DAYS:-7}
mkdir -p "$out" "$cache/debs"
work=$(mktemp -d /var/tmp/agentsandbox-image.XXXXXX)
trap 'rm -rf "$work"' EXIT

# recipe NAME: the Debian packages of the image's first layer, its .deb,
# and its config (entrypoint, command, user: "" for root, else the name of
# the user the .deb makes).
recipe() {
	case $1 in
	codes-sandbox)
		packages=(bubblewrap ca-certificates) deb=codes-sandbox user=""
		title="codes-sandbox: the sandbox worker of OpenVibe.Codes"
		entrypoint=/usr/bin/codes-sandbox cmd=(serve --config /etc/codes-sandbox/config.json) ;;
	codes-sandbox-browser)
		recipe codes-sandbox
		packages+=(chromium)
		title="codes-sandbox with Chromium: the sandbox worker of OpenVibe.Codes, browser sandboxes on" ;;
	ovlive)
		# systemd-standalone-sysusers is what ovlive's postinst needs of
		# systemd (the user ovlive); the container runtime is its supervisor.
		packages=(ca-certificates systemd-standalone-sysusers) deb=ovlive user=ovlive
		title="ovlive: OpenVibe.Live's worker check-in endpoint and owner's view"
		# Its conffile listens on loopback: in a container, every address.
		entrypoint=/usr/bin/ovlive cmd=(serve --config /etc/ovlive/ovlive.toml --listen 0.0.0.0:8080) ;;
	*)
		echo "image.sh: unknown image $1: give codes-sandbox, codes-sandbox-browser or ovlive" >&2
		exit 2 ;;
	esac
}

# base NAME: the path of the cached tarball of the image's Debian layer,
# built when missing, stale or its recipe changed.
base() {
	local key tar
	key=$(printf '%s\n' "v1" "$suite" "$arch" "${packages[@]}" | sha256sum | cut -c1-16)
	tar=$cache/base-$1-$key.tar
	if [ -f "$tar" ] && [ -z "$(find "$tar" -mtime "+$max_age")" ] && [ "${IMAGE_REFRESH:-}" != 1 ]; then
		echo "$tar"
		return
	fi
	echo "image.sh: building the Debian layer of $1 (${packages[*]}) with mmdebstrap; cached in $cache" >&2
	local pkgs
	pkgs=$(IFS=,; echo "${packages[*]}")
	mmdebstrap --quiet --mode=root --variant=essential --format=tar --architectures="$arch" \
		--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr --include="$pkgs" \
		--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-include=/usr/share/doc/*/copyright' \
		--setup-hook='mkdir -p "$1"/var/cache/apt/archives' \
		--setup-hook="sync-in $cache/debs /var/cache/apt/archives" \
		--customize-hook="sync-out /var/cache/apt/archives $cache/debs" \
		--customize-hook='rm -f "$1"/var/cache/apt/archives/*.deb "$1"/var/log/dpkg.log "$1"/var/log/apt/*.log "$1"/var/log/alternatives.log' \
		--skip=essential/unlink \
		"$suite" "$tar.tmp" >&2
	mv "$tar.tmp" "$tar"
	find "$cache" -maxdepth 1 -name "base-$1-????????????????.tar" ! -name "base-$1-$key.tar" -delete
	echo "$tar"
}

# sbom ROOTFS NAME: an SPDX 2.3 document of every package dpkg installed in
# ROOTFS (purls name each), on stdout.
sbom() {
	chroot "$1" dpkg-query -W -f '${Package}\t${Version}\t${Architecture}\t${Maintainer}\n' |
		jq -R -s --arg name "$2" --arg version "$version" --arg created "$created" --arg revision "$revision" '
		[split("\n")[] | select(length > 0) | split("\t")] as $rows |
		{
			spdxVersion: "SPDX-2.3", dataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
			name: ($name + " " + $version),
			documentNamespace: ("https://openvibe.network/spdx/agentsandbox/" + $name + "/" + $version + "/" + $revision),
			creationInfo: {created: $created, creators: ["Tool: agentsandbox scripts/image.sh"]},
			packages: [$rows[] | {
				name: .[0], SPDXID: ("SPDXRef-Package-deb-" + (.[0] | gsub("[^A-Za-z0-9.-]"; "-"))),
				versionInfo: .[1], supplier: ("Organization: " + (.[3] | gsub("[\n\r]"; " "))),
				downloadLocation: "NOASSERTION", filesAnalyzed: false,
				licenseConcluded: "NOASSERTION", licenseDeclared: "NOASSERTION", copyrightText: "NOASSERTION",
				externalRefs: [{referenceCategory: "PACKAGE-MANAGER", referenceType: "purl",
					referenceLocator: ("pkg:deb/debian/" + .[0] + "@" + (.[1] | @uri) + "?arch=" + .[2] + "&distro=debian-12")}]
			}],
			relationships: [$rows[] | {spdxElementId: "SPDXRef-DOCUMENT", relationshipType: "DESCRIBES",
				relatedSpdxElement: ("SPDXRef-Package-deb-" + (.[0] | gsub("[^A-Za-z0-9.-]"; "-")))}]
		}'
}

# build NAME: dist/NAME.oci.tar and the SBOM and package list beside it.
build() {
	local name=$1 debfile layout bundle rootfs uid gid
	recipe "$name"
	debfile=$(ls "$debdir/${deb}_"*"_$arch.deb" 2>/dev/null | tail -n1) ||
		{ echo "image.sh: no $debdir/${deb}_*_$arch.deb: run make deb first" >&2; exit 1; }
	local basetar
	basetar=$(base "$name")
	layout=$work/$name/oci bundle=$work/$name/bundle rootfs=$work/$name/bundle/rootfs
	mkdir -p "$work/$name"
	umoci init --layout "$layout"
	umoci new --image "$layout:$tag"
	umoci raw add-layer --image "$layout:$tag" --history.created_by "mmdebstrap --variant=essential $suite: ${packages[*]}" \
		--history.created "$created" "$basetar"
	umoci unpack --image "$layout:$tag" "$bundle" >/dev/null
	cp "$debfile" "$rootfs/tmp/"
	chroot "$rootfs" dpkg -i "/tmp/$(basename "$debfile")" >&2
	rm -f "$rootfs/tmp/$(basename "$debfile")" "$rootfs/var/log/dpkg.log"
	if [ "$deb" = codes-sandbox ]; then
		# The seccomp profile its container runs under (docs/kubernetes.md),
		# for a node or a host to install from the image.
		install -D -m 0644 deploy/kubernetes/agentsandbox/files/seccomp.json "$rootfs/usr/share/codes-sandbox/seccomp.json"
	fi
	mkdir -p "$rootfs/usr/share/doc/agentsandbox-image"
	sbom "$rootfs" "$name" >"$out/$name.sbom.spdx.json"
	cp "$out/$name.sbom.spdx.json" "$rootfs/usr/share/doc/agentsandbox-image/sbom.spdx.json"
	chroot "$rootfs" dpkg-query -W -f '${Package}\t${Version}\t${Architecture}\n' >"$out/$name.packages.txt"
	cp "$out/$name.packages.txt" "$rootfs/usr/share/doc/agentsandbox-image/packages.txt"
	local userflag=()
	if [ -n "$user" ]; then
		# A numeric user, so that Kubernetes' runAsNonRoot can verify it.
		uid=$(awk -F: -v u="$user" '$1 == u {print $3}' "$rootfs/etc/passwd")
		gid=$(awk -F: -v u="$user" '$1 == u {print $4}' "$rootfs/etc/passwd")
		[ -n "$uid" ] || { echo "image.sh: $deb made no user $user" >&2; exit 1; }
		userflag=(--config.user "$uid:$gid")
		# Its state directory (systemd-tmpfiles makes it on a host).
		install -d -o "$uid" -g "$gid" -m 0700 "$rootfs/var/lib/$user"
	fi
	umoci repack --image "$layout:$tag" --history.created_by "dpkg -i $(basename "$debfile")" --history.created "$created" "$bundle"
	local cmdflags=()
	for c in "${cmd[@]}"; do cmdflags+=(--config.cmd "$c"); done
	umoci config --image "$layout:$tag" --created "$created" --author "agentsandbox" \
		--history.created_by "scripts/image.sh: config" --history.created "$created" \
		--config.entrypoint "$entrypoint" "${cmdflags[@]}" "${userflag[@]}" --config.workingdir / \
		--config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--config.label "org.opencontainers.image.title=$name" \
		--config.label "org.opencontainers.image.description=$title" \
		--config.label "org.opencontainers.image.version=$version" \
		--config.label "org.opencontainers.image.revision=$revision" \
		--config.label "org.opencontainers.image.created=$created" \
		--config.label "org.opencontainers.image.licenses=Apache-2.0" \
		--config.label "org.opencontainers.image.vendor=OpenVibe" \
		--config.label "org.opencontainers.image.url=https://openvibe.network/" \
		--manifest.annotation "org.opencontainers.image.version=$version" \
		--manifest.annotation "org.opencontainers.image.revision=$revision"
	umoci gc --layout "$layout"
	# The archive's reference names the image (podman load, ctr import).
	jq --arg ref "agentsandbox/$name:$tag" \
		'.manifests |= map(.annotations["org.opencontainers.image.ref.name"] = $ref)' \
		"$layout/index.json" >"$layout/index.json.tmp" && mv "$layout/index.json.tmp" "$layout/index.json"
	tar -C "$layout" --sort=name --owner=0 --group=0 --numeric-owner --mtime="$created" -cf "$out/$name.oci.tar.tmp" .
	mv "$out/$name.oci.tar.tmp" "$out/$name.oci.tar"
	echo "$out/$name.oci.tar"
}

for name in "${images[@]}"; do
	build "$name"
done

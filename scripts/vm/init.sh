#!/bin/busybox sh
# shellcheck shell=dash
# init.sh: the /init of the guest's initramfs (run by busybox sh as PID 1).
#
# It loads the virtio and 9p modules, builds the real root on a tmpfs, and
# switch_roots into it (never chroot: the kernel refuses new user namespaces
# to a chrooted process, so bubblewrap would fail). The new root holds:
#
#   /usr         the host's, over 9p, read-only
#   /etc         the host's, over 9p, read-only, under a tmpfs overlay (so
#                the guest may write it; the host's is never changed)
#   /share       the per-run 9p share, read-write (binaries in, results out)
#   /proc /sys /dev /run /tmp /var /root   fresh (tmpfs where writable)
#   /sys/fs/cgroup   cgroup2 only (plain mode; systemd mounts it itself)
#   /.vm         this initramfs's payload: stage2.sh, the systemd units, busybox
#
# The mode comes from the kernel command line: vm.mode=plain (default) runs
# /.vm/stage2.sh as PID 1; vm.mode=systemd runs /lib/systemd/systemd.
# Any failure powers the guest off at once: the host sees no exit code.
# (busybox sh, not bash: nothing else exists before the host's /usr is
# mounted. -e is a backstop; every step that can fail says so with die.)
set -eu -o pipefail

export PATH=/bin
/bin/busybox --install -s /bin

log() { echo "vm-init: $*"; }
die() {
	log "FAILED: $*"
	sync
	poweroff -f
	sleep 60
}

mount -t proc proc /proc || die "mount /proc"
mount -t sysfs sysfs /sys || die "mount /sys"
mount -t devtmpfs devtmpfs /dev || die "mount /dev"
# The initramfs has no /dev/console node, so the kernel gave init no console.
exec </dev/console >/dev/console 2>&1

mode=plain
for arg in $(cat /proc/cmdline); do
	case $arg in
	vm.mode=*) mode=${arg#vm.mode=} ;;
	esac
done
log "mode $mode, kernel $(uname -r)"

for m in $(cat /modules/order); do
	insmod "/modules/$m.ko" || die "insmod $m"
done

# 9p options: a large message size for throughput; the read-only host trees
# may be cached, the read-write share must not be (results are read by the
# host while the guest runs, and after it stops).
p9=trans=virtio,version=9p2000.L,msize=512000
r=/newroot
mount -t tmpfs -o mode=0755 root "$r" || die "tmpfs root"
mkdir -p "$r/usr" "$r/etc" "$r/share" "$r/proc" "$r/sys" "$r/dev" "$r/run" "$r/tmp" \
	"$r/var" "$r/root" "$r/mnt" "$r/.vm" || die "mkdir in the new root"
mount -t 9p -o "$p9,ro,cache=loose" hostusr "$r/usr" || die "mount the host's /usr"
for d in bin sbin lib lib32 lib64 libx32; do
	[ -d "$r/usr/$d" ] && ln -s "usr/$d" "$r/$d"
done
mount -t 9p -o "$p9,cache=none" share "$r/share" || die "mount the share"

# A writable /etc, as a real host has (tests write canaries there): the
# host's, read-only over 9p, under a tmpfs upper layer. The host's own /etc
# is never written.
mkdir -p "$r/.vm/etc-lower" "$r/.vm/etc-rw"
mount -t 9p -o "$p9,ro,cache=loose" hostetc "$r/.vm/etc-lower" || die "mount the host's /etc"
mount -t tmpfs -o mode=0755 etc-rw "$r/.vm/etc-rw" || die "tmpfs for /etc"
mkdir -p "$r/.vm/etc-rw/upper" "$r/.vm/etc-rw/work"
mount -t overlay -o "lowerdir=$r/.vm/etc-lower,upperdir=$r/.vm/etc-rw/upper,workdir=$r/.vm/etc-rw/work" \
	etc "$r/etc" || die "overlay /etc"
# The guest's own identity.
tr -d '-' </proc/sys/kernel/random/uuid >"$r/etc/machine-id"
echo guest >"$r/etc/hostname"
if [ "$mode" = systemd ]; then
	# Only the units of this harness next to what sysinit.target and
	# basic.target pull in: the host's services stay off.
	cp /payload/systemd/* "$r/etc/systemd/system/" || die "install the harness's units"
	# Units that would try the network, or that a guest has no use for.
	for u in systemd-timesyncd.service systemd-pstore.service systemd-firstboot.service \
		apt-daily.timer apt-daily-upgrade.timer epmd.socket; do
		ln -sf /dev/null "$r/etc/systemd/system/$u"
	done
fi

cp -a /payload/. "$r/.vm/" || die "copy the payload"
cp /bin/busybox "$r/.vm/busybox"

mount -t proc -o nosuid,nodev,noexec proc "$r/proc" || die "mount proc"
mount -t sysfs -o nosuid,nodev,noexec sysfs "$r/sys" || die "mount sysfs"
# /dev moves (the console stays open on it); /proc and /sys are fresh.
mount -o move /dev "$r/dev" || die "move /dev"
mkdir -p "$r/dev/pts" "$r/dev/shm"
mount -t devpts -o nosuid,noexec,ptmxmode=0666 devpts "$r/dev/pts" || die "mount devpts"
mount -t tmpfs -o nosuid,nodev,mode=1777 shm "$r/dev/shm" || die "mount /dev/shm"
mount -t tmpfs -o nosuid,nodev,mode=0755 run "$r/run" || die "mount /run"
mount -t tmpfs -o nosuid,nodev,mode=1777 tmp "$r/tmp" || die "mount /tmp"
mount -t tmpfs -o mode=0755 var "$r/var" || die "mount /var"
mkdir -p "$r/var/tmp" "$r/var/lib" "$r/var/log" "$r/var/cache"
chmod 1777 "$r/var/tmp"
mount -t tmpfs -o mode=0700 roothome "$r/root" || die "mount /root"
if [ "$mode" != systemd ]; then
	# cgroup v2 only, as systemd mounts it (cgroup_no_v1=all on the kernel
	# command line keeps every v1 controller off).
	mount -t cgroup2 -o nosuid,nodev,noexec,nsdelegate,memory_recursiveprot cgroup2 "$r/sys/fs/cgroup" ||
		die "mount cgroup2"
fi

umount /proc /sys
case $mode in
systemd) exec switch_root "$r" /lib/systemd/systemd ;;
*) exec switch_root "$r" /bin/bash /.vm/stage2.sh ;;
esac
die "switch_root failed"

package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"openvibe.network/agentsandbox"
)

// treeDigest is a digest of everything under dir (names, modes, owners,
// sizes, contents, link targets): a layer that changed changes it.
func treeDigest(tb testing.TB, dir string) string {
	tb.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v %d\n", strings.TrimPrefix(p, dir), fi.Mode(), fi.Size())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, _ := os.Readlink(p)
			fmt.Fprintln(h, t)
		case fi.Mode().IsRegular() && fi.Size() < 1<<20:
			b, _ := os.ReadFile(p)
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestImageSandbox: a sandbox on an image runs as the image's user inside
// and the slot's uid outside, with no capability, seccomp on, the image's
// files its own to change, every change in its capped tmpfs and gone with
// the wipe, the image itself untouched, and the image released once.
func TestImageSandbox(t *testing.T) {
	rt := imageRuntime(t, Config{Capacity: 2})
	var released atomic.Int32
	img := busyboxImage(t, func(i *RootImage) { i.Release = func() { released.Add(1) } })
	before := treeDigest(t, img.Layers[0])
	info := newBox(t, rt, Options{Image: img, Limits: agentsandbox.Limits{DiskMB: 32}})
	if info.Image != img.Ref || info.ImageDigest != img.Digest {
		t.Errorf("info names %q %q", info.Image, info.ImageDigest)
	}
	if out := shOK(t, rt, info.ID, "id -u; id -g; stat -c %u /bin/busybox /etc; echo $USER $HOME; pwd"); out != "0\n0\n0\n0\nroot /workspace\n/workspace\n" {
		t.Errorf("ids, owners and env: %q", out)
	}
	status := shOK(t, rt, info.ID, "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status")
	for _, line := range strings.Split(strings.TrimSpace(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		want := map[string]string{"NoNewPrivs": "1", "Seccomp": "2"}[k]
		if want == "" {
			want = "0000000000000000"
		}
		if strings.TrimSpace(v) != want {
			t.Errorf("%s is %s, want %s", k, strings.TrimSpace(v), want)
		}
	}
	pids, err := rt.HostPids(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if uid, err := hostUIDOf(pid); err != nil || uid != info.HostUID || uid == 0 {
			t.Errorf("host pid %d runs as %d (%v), want the slot's %d", pid, uid, err, info.HostUID)
		}
	}
	shOK(t, rt, info.ID, "echo mine > /etc/motd && mkdir -p /usr/local/lib/x && echo y > /usr/local/lib/x/y && rm /bin/cat && echo z > /tmp/z")
	if out := shOK(t, rt, info.ID, "cat /etc/motd /usr/local/lib/x/y; test -e /bin/cat || echo cat-gone; cat /etc/resolv.conf"); out != "mine\ny\ncat-gone\n"+etcFiles(hostname)["resolv.conf"] {
		t.Errorf("writes into the image: %q", out)
	}
	for _, cmd := range []string{"mknod /tmp/mem c 1 1", "mknod /etc/null c 1 3", "mount -t tmpfs x /mnt", "unshare -U true", "chroot / true"} {
		if r := sh(t, rt, info.ID, cmd); r.ExitCode == 0 {
			t.Errorf("%q succeeded", cmd)
		}
	}
	if r := sh(t, rt, info.ID, "dd if=/dev/zero of=/usr/big bs=1M count=64 2>&1"); r.ExitCode == 0 || !strings.Contains(r.stdout, "No space left") {
		t.Errorf("a write past the disk limit into the image's /usr: exit %d, %q", r.ExitCode, r.stdout)
	}
	other := newBox(t, rt, Options{Image: busyboxImage(t, nil)})
	if out := shOK(t, rt, other.ID, "cat /etc/motd 2>&1; test -e /bin/cat && echo cat-here; test -e /usr || echo no-usr"); strings.Contains(out, "mine") || !strings.Contains(out, "cat-here\nno-usr") {
		t.Errorf("another sandbox of the image sees the first one's writes: %q", out)
	}
	if rep, err := rt.Delete(t.Context(), info.ID); err != nil || !rep.Verified {
		t.Fatalf("Delete: %+v, %v", rep, err)
	}
	if n := released.Load(); n != 1 {
		t.Errorf("the image was released %d times, want once", n)
	}
	if after := treeDigest(t, img.Layers[0]); after != before {
		t.Error("the image's layer changed")
	}
}

// TestImageUser: an image that runs as an unprivileged user owns what that
// user owns in the image and nothing of root's.
func TestImageUser(t *testing.T) {
	rt := imageRuntime(t, Config{Capacity: 1})
	img := busyboxImage(t, func(i *RootImage) { i.UID, i.GID, i.User, i.WorkingDir = 1000, 1000, "app", "/home/app" })
	info := newBox(t, rt, Options{Image: img})
	if out := shOK(t, rt, info.ID, "id -u; echo $USER; pwd; stat -c %u /home/app /etc; echo hi > /home/app/f && cat /home/app/f"); out != "1000\napp\n/home/app\n1000\n65534\nhi\n" {
		t.Errorf("user, cwd and owners: %q", out)
	}
	if r := sh(t, rt, info.ID, "echo x > /etc/x"); r.ExitCode == 0 {
		t.Error("an unprivileged image user wrote into root's /etc")
	}
}

// TestImageRefusals: a browser on an image, an image without layers, and an
// image sandbox on a runtime whose init is not static are refused, and the
// image released.
func TestImageRefusals(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1}) // the test binary's init: dynamic under -race
	var released atomic.Int32
	rel := func(i *RootImage) { i.Release = func() { released.Add(1) } }
	for _, o := range []Options{
		{Image: busyboxImage(t, rel), Browser: true},
		{Image: busyboxImage(t, func(i *RootImage) { rel(i); i.Layers = nil })},
		{Image: busyboxImage(t, func(i *RootImage) { rel(i); i.Env = []string{"NOEQUALS"} })},
	} {
		if _, err := rt.Create(t.Context(), o); err == nil {
			t.Errorf("Create(%+v) succeeded", o.Image)
		}
	}
	if n := released.Load(); n != 3 {
		t.Errorf("released %d times, want 3", n)
	}
}

// TestImagePool: a pool of an image's sandboxes serves a create of that
// image (the create's hold on the image is let go at once, the pooled
// sandbox's kept until its wipe), and is filled again; a create of another
// image, or of the host's view, is not served from it.
func TestImagePool(t *testing.T) {
	var poolHolds, poolReleases atomic.Int32
	acquire := func(context.Context) (*RootImage, error) {
		poolHolds.Add(1)
		return busyboxImage(t, func(i *RootImage) { i.Release = func() { poolReleases.Add(1) } }), nil
	}
	rt := imageRuntime(t, Config{Capacity: 2, PoolImages: []PoolImage{{Ref: "registry.test/tiny/busybox:1", N: 1, Acquire: acquire}}})
	pooled := waitPooled(t, rt, 1)
	var createReleases atomic.Int32
	img := busyboxImage(t, func(i *RootImage) { i.Release = func() { createReleases.Add(1) } })
	info := newBox(t, rt, Options{Image: img})
	if info.ID != pooled[0] {
		t.Errorf("the create got %s, not the pooled %s", info.ID, pooled[0])
	}
	if createReleases.Load() != 1 {
		t.Errorf("the create's hold was released %d times at create, want once (the pooled sandbox has its own)", createReleases.Load())
	}
	if info.Image != img.Ref || info.ImageDigest != img.Digest {
		t.Errorf("info names %q %q", info.Image, info.ImageDigest)
	}
	if out := shOK(t, rt, info.ID, "id -u; cat /etc/hostname 2>/dev/null; echo ok"); out != "0\nok\n" {
		t.Errorf("in the pooled image sandbox: %q", out)
	}
	waitPooled(t, rt, 1)
	if _, err := rt.Delete(t.Context(), info.ID); err != nil {
		t.Fatal(err)
	}
	if poolHolds.Load() != 2 || poolReleases.Load() != 1 {
		t.Errorf("the pool held the image %d times and released it %d times, want 2 and 1", poolHolds.Load(), poolReleases.Load())
	}
	other := busyboxImage(t, func(i *RootImage) { i.Digest = "sha256:" + strings.Repeat("2", 64) })
	created := newBox(t, rt, Options{Image: other})
	if created.ImageDigest != other.Digest {
		t.Errorf("a create of another image got %s", created.ImageDigest)
	}
}

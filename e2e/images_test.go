package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/image/registrytest"
)

// stateDir is a state directory of the test's own (root's, 0755, as the
// runtime needs), removed at its end.
func stateDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "agentsandbox-e2e-state-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// TestImageSandboxes: a worker that allows a registry on loopback proves
// its checks in an image sandbox (the report claims images and names the
// image), and through the API and the Go client a sandbox of the Debian
// test image runs Python, pip installs a local wheel and imports it, writes
// to /usr/local, installs a local .deb with apt-get as the image's root;
// another tenant of the image sees none of it, the image is intact after
// the wipe, and a missing tag or a registry the worker does not allow is a
// clear error.
func TestImageSandboxes(t *testing.T) {
	bin := binaries(t)
	reg := registrytest.Start(t, registrytest.Options{})
	debian := reg.Ref("debian/python:1")
	digest := reg.Push(t, "debian/python:1", registrytest.Debian(t))
	live, w := startLive(t, bin)
	wp, api := startWorker(t, bin, live, w, "--checkin-interval", "10m", "--state-dir", stateDir(t),
		"--image-registry-insecure", reg.Name, "--selftest-image", debian, "--pool", "0")
	var v ownerView
	waitFor(t, "the owner's view to say alive", func() bool { v = view(t, live, w); return v.State == "alive" }, wp)
	var r report
	if err := json.Unmarshal(v.Report, &r); err != nil {
		t.Fatal(err)
	}
	if r.Isolation["images"] != true || !strings.HasSuffix(r.Isolation["images_proved_with"].(string), "@"+digest.String()) {
		t.Errorf("the report's isolation does not claim images proved with %s: %v", digest, r.Isolation)
	}

	wc := client.NewWorker(api, "e2e-api-token", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a, err := wc.Create(ctx, client.CreateOptions{Image: debian})
	if err != nil {
		t.Fatal(err)
	}
	if a.Image != debian || a.ImageDigest != digest.String() {
		t.Errorf("sandbox info names %q %q, want %q %q", a.Image, a.ImageDigest, debian, digest)
	}
	sh := func(id, script string) (string, int) {
		t.Helper()
		var out strings.Builder
		res, err := wc.Exec(ctx, id, client.ExecRequest{Argv: []string{"bash", "-c", script}, Timeout: 4 * time.Minute}, &out, &out)
		if err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		return out.String(), res.ExitCode
	}
	// pip install ./x.whl: the image's local wheel, from the workspace,
	// into the image's site-packages.
	out, code := sh(a.ID, "cp /opt/wheels/agentsandbox_hello-1.0-py3-none-any.whl /workspace/ && cd /workspace && "+
		"python3 -m pip install --no-index --no-cache-dir ./agentsandbox_hello-1.0-py3-none-any.whl >/dev/null 2>&1; echo pip=$?; "+
		"cd / && python3 -c 'import agentsandbox_hello; print(agentsandbox_hello.greet()); print(agentsandbox_hello.__file__)'; "+
		"echo mine > /usr/local/share/mine && cat /usr/local/share/mine; id -u")
	if code != 0 || !strings.Contains(out, "pip=0\nhello from a local wheel\n/usr/") || !strings.HasSuffix(out, "mine\n0\n") {
		t.Errorf("python, pip and /usr/local in the image sandbox: exit %d\n%s", code, out)
	}
	out, code = sh(a.ID, "apt-get install -y -q /opt/debs/agentsandbox-hello_1.0_all.deb >/tmp/apt.log 2>&1; echo apt=$?; "+
		"cat /usr/share/agentsandbox-hello/hello || tail -5 /tmp/apt.log")
	if code != 0 || out != "apt=0\nhello from a local deb\n" {
		t.Errorf("apt-get install of a local .deb as the image's root: exit %d\n%s", code, out)
	}

	b, err := wc.Create(ctx, client.CreateOptions{Image: debian})
	if err != nil {
		t.Fatal(err)
	}
	out, _ = sh(b.ID, "ls /usr/local/share; test -e /usr/share/agentsandbox-hello && echo deb-seen; python3 -c 'import agentsandbox_hello' 2>/dev/null && echo wheel-seen; true")
	if strings.Contains(out, "mine") || strings.Contains(out, "seen") {
		t.Errorf("another tenant of the image sees the first one's writes: %q", out)
	}
	if rep, err := wc.Delete(ctx, a.ID); err != nil || !rep.Verified {
		t.Fatalf("delete: %+v %v", rep, err)
	}
	if traces := sandboxTraces(a.ID); len(traces) != 0 {
		t.Errorf("left after the wipe: %v", traces)
	}
	c, err := wc.Create(ctx, client.CreateOptions{Image: debian})
	if err != nil {
		t.Fatal(err)
	}
	out, code = sh(c.ID, "test -e /usr/local/share/mine && echo left; python3 -c 'print(6*7)'")
	if code != 0 || out != "42\n" {
		t.Errorf("the image after the wipe: exit %d %q", code, out)
	}
	imgs, err := wc.Images(ctx)
	if err != nil || len(imgs) != 1 || imgs[0].Digest != digest.String() || imgs[0].InUse != 2 {
		t.Errorf("images: %+v %v", imgs, err)
	}
	for _, bad := range []struct {
		ref  string
		want error
	}{{reg.Ref("debian/python:nope"), client.ErrImageNotFound}, {"elsewhere.example/team/py:1", client.ErrImageNotAllowed}} {
		if _, err := wc.Create(ctx, client.CreateOptions{Image: bad.ref}); !errors.Is(err, bad.want) {
			t.Errorf("create of %s: %v, want %v", bad.ref, err, bad.want)
		}
	}
	if !strings.Contains(wp.stderr.String(), `"image_digest":"`+digest.String()+`"`) {
		t.Error("no log line names the sandbox's image by digest")
	}
}

// TestRunImage: `codes-sandbox run --image` runs one command on an image
// (the front hands it to the worker, which holds the image store).
func TestRunImage(t *testing.T) {
	bin := binaries(t)
	reg := registrytest.Start(t, registrytest.Options{})
	reg.Push(t, "tiny/busybox:1", registrytest.Busybox(t, v1.Config{}))
	out, err := exec.Command(filepath.Join(bin, "codes-sandbox"), "run", "--image", reg.Ref("tiny/busybox:1"),
		"--image-registry-insecure", reg.Name, "--state-dir", stateDir(t), "--", "sh", "-c", "id -u; ls /bin/busybox; echo x > /etc/x && cat /etc/x").CombinedOutput()
	if err != nil || string(out) != "0\n/bin/busybox\nx\n" {
		t.Fatalf("run --image: %v\n%s", err, out)
	}
}

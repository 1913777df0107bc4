package podmantest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/testenv"
	ivm "openvibe.network/agentsandbox/internal/vmtest"
)

// Where a Kubernetes node on cgroup v2 runs the worker: containerd starts
// it with runc, a cgroup namespace of its own and /sys/fs/cgroup mounted
// read-only, /proc masked, the capabilities and seccomp profile of its
// security context. This host is on cgroup v1, so that is proved in the
// cgroup-v2-only guest (docs/hosts.md) with runc itself, which the guest
// has from the host's /usr, on the image's root file system: podman's own
// storage and network would be most of the boot's work under emulation.

// containerdMasked and containerdReadonly are the /proc and /sys paths
// containerd's CRI masks and makes read-only for a container that is not
// privileged (its oci.populateDefaultUnixSpec).
var (
	containerdMasked = []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
		"/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/sys/devices/virtual/powercap", "/proc/scsi"}
	containerdReadonly = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// TestWorkerCgroupV2Guest: on a cgroup-v2-only kernel, in a container run
// by runc as containerd runs one for the chart's DaemonSet (files/
// security.json: seven capabilities, the seccomp profile, a private cgroup
// namespace with the cgroup file system read-only, /proc masked, a
// read-only root), the worker readies its container (a fresh /proc, its
// own cgroup made writable and delegated) and its self-test proves every
// isolation fact.
func TestWorkerCgroupV2Guest(t *testing.T) {
	testenv.RequireRoot(t)
	ivm.Require(t)
	if testing.Short() {
		t.Skip("skipping the guest boot in -short mode")
	}
	archive := imageArchive(t, "codes-sandbox.oci.tar")
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-time.Minute))
		defer cancel()
	}
	root, err := ivm.Root()
	if err != nil {
		t.Fatal(err)
	}
	share := t.TempDir()
	start := time.Now()
	bundle := filepath.Join(share, "bundle")
	unpack(t, archive, bundle)
	writeSpec(t, filepath.Join(bundle, "config.json"), readSecurity(t))
	t.Logf("unpacked the image into a runc bundle on the host in %v", time.Since(start).Round(time.Second))

	rep, err := ivm.Run(ctx, ivm.Config{Root: root}, share, []ivm.Command{
		{Name: "v2-only", Argv: []string{"sh", "-c", `stat -f -c %T /sys/fs/cgroup; awk '$3 == "cgroup" {exit 1}' /proc/self/mounts`}, Timeout: time.Minute},
		{Name: "worker", Argv: []string{"runc", "run", "--bundle", ivm.GuestShare + "/bundle", "agentsandbox-worker"}, Timeout: 5 * time.Minute},
	})
	if err != nil {
		if rep != nil {
			for _, r := range rep.Results {
				t.Logf("%s: exit %d:\n%s", r.Name, r.ExitCode, r.Output)
			}
		}
		t.Fatal(err)
	}
	t.Logf("guest: booted in %v, whole run %v", rep.Boot.Round(100*time.Millisecond), rep.Wall.Round(time.Second))
	for _, c := range []struct {
		name string
		want []string
	}{
		{"v2-only", []string{"cgroup2fs"}},
		{"worker", []string{"mounted a fresh procfs over /proc in the container's mount namespace: the container masks it",
			"remounted the container's own cgroup at /sys/fs/cgroup read-write", "all checks passed"}},
	} {
		res, ok := rep.Result(c.name)
		for _, w := range c.want {
			if !ok || res.ExitCode != 0 || !strings.Contains(res.Output, w) {
				t.Errorf("%s in the guest: exit %d, want %q in:\n%s", c.name, res.ExitCode, w, res.Output)
			}
		}
		t.Logf("%s in the guest (%v):\n%s", c.name, res.Duration.Round(time.Second), res.Output)
	}
}

// imageArchive returns the path of an image archive (make image), or skips
// or fails the test (see testenv.Missing).
func imageArchive(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("AGENTSANDBOX_IMAGE_DIR")
	if dir == "" {
		dir = "../dist"
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		testenv.Missing(t, "no image archive "+p+": run make image")
	}
	return p
}

// unpack unpacks the image of an OCI archive into a runc bundle with umoci.
func unpack(t *testing.T, archive, bundle string) {
	t.Helper()
	umoci := testenv.RequireBinary(t, "umoci", "apt-get install -y umoci")
	layout := t.TempDir()
	if out, err := exec.Command("tar", "-C", layout, "-xf", archive).CombinedOutput(); err != nil {
		t.Fatalf("unpack %s: %v\n%s", archive, err, out)
	}
	// umoci addresses an image by a plain tag; the archive names it fully.
	index := filepath.Join(layout, "index.json")
	b, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	var idx map[string]any
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	for _, m := range idx["manifests"].([]any) {
		m.(map[string]any)["annotations"] = map[string]string{"org.opencontainers.image.ref.name": "worker"}
	}
	writeJSON(t, index, idx)
	if out, err := exec.Command(umoci, "unpack", "--image", layout+":worker", bundle).CombinedOutput(); err != nil {
		t.Fatalf("umoci unpack: %v\n%s", err, out)
	}
}

// writeSpec rewrites the bundle's runtime spec (umoci's, runc's defaults)
// to run the worker's self-test as containerd runs a container of sec:
// exactly its capabilities, its seccomp profile, a cgroup namespace of its
// own with /sys/fs/cgroup read-only, containerd's masked and read-only
// paths, a read-only root with tmpfs at the directories it writes.
func writeSpec(t *testing.T, path string, sec security) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	profile, err := os.ReadFile(filepath.Join(chartFiles, sec.SeccompProfile))
	if err != nil {
		t.Fatal(err)
	}
	var seccomp any
	if err := json.Unmarshal(profile, &seccomp); err != nil {
		t.Fatal(err)
	}
	var caps []string
	for _, c := range sec.Capabilities {
		caps = append(caps, "CAP_"+c)
	}
	process := spec["process"].(map[string]any)
	process["terminal"] = false
	process["args"] = []string{"codes-sandbox", "selftest", "--browser", "off", "-v"}
	process["capabilities"] = map[string][]string{"bounding": caps, "effective": caps, "permitted": caps}
	process["noNewPrivileges"] = !sec.AllowPrivilegeEscalation
	process["rlimits"] = []map[string]any{{"type": "RLIMIT_NOFILE", "hard": 65536, "soft": 65536}}
	spec["root"] = map[string]any{"path": "rootfs", "readonly": sec.ReadOnlyRootFilesystem}
	mounts := spec["mounts"].([]any)
	for _, d := range sec.WritableDirs {
		mounts = append(mounts, map[string]any{"destination": d, "type": "tmpfs", "source": "tmpfs",
			"options": []string{"nosuid", "nodev", "mode=755", "size=262144k"}})
	}
	spec["mounts"] = mounts
	linux := spec["linux"].(map[string]any)
	namespaces := linux["namespaces"].([]any)
	if sec.CgroupNamespace == "private" {
		namespaces = append(namespaces, map[string]string{"type": "cgroup"})
	}
	linux["namespaces"] = namespaces
	linux["maskedPaths"] = containerdMasked
	linux["readonlyPaths"] = containerdReadonly
	linux["seccomp"] = seccomp
	linux["cgroupsPath"] = "/agentsandbox-podmantest"
	writeJSON(t, path, spec)
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

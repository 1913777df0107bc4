// Package podmantest runs the worker's and Live's images (make image) under
// a real container runtime, Debian's podman with runc (what containerd runs
// on a Kubernetes node), and proves the least privilege the worker needs:
// deploy/kubernetes/agentsandbox/files/security.json, the one source of
// truth that the chart's DaemonSet is rendered from and checked against. See docs/kubernetes.md.
//
// Nothing is pulled from a registry: the archives are loaded with podman
// load. Every container has no network but its own loopback (--network
// none; the worker joins Live's, like two containers of one pod), which
// the test reaches by dialing from inside that network namespace.
package podmantest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/internal/osthread"
	"openvibe.network/agentsandbox/internal/testenv"
)

// chartFiles holds the worker's least privilege (security.json) and its
// seccomp profile, in the Helm chart that applies them.
const chartFiles = "../deploy/kubernetes/agentsandbox/files"

// wait bounds every wait of these tests (a worker's start and self-test take
// a few seconds; an emulated or loaded machine more).
const wait = 90 * time.Second

// security is the chart's files/security.json: the worker container's
// least privilege.
type security struct {
	Description              string   `json:"description"`
	RunAsUser                int      `json:"runAsUser"`
	Privileged               bool     `json:"privileged"`
	AllowPrivilegeEscalation bool     `json:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   bool     `json:"readOnlyRootFilesystem"`
	Capabilities             []string `json:"capabilities"`
	SeccompProfile           string   `json:"seccompProfile"`
	AppArmorProfile          string   `json:"appArmorProfile"`
	ProcMount                string   `json:"procMount"`
	CgroupNamespace          string   `json:"cgroupNamespace"`
	WritableDirs             []string `json:"writableDirs"`
}

// readSecurity decodes the chart's files/security.json strictly.
func readSecurity(t *testing.T) security {
	t.Helper()
	b, err := os.ReadFile(chartFiles + "/security.json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s security
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("files/security.json: %v", err)
	}
	return s
}

// flags are podman's options for exactly s: every capability dropped but
// s's, s's seccomp profile, its AppArmor setting, its cgroup namespace, a
// read-only root with tmpfs where the worker writes, and /proc as the
// runtime masks it unless s unmasks it.
func (s security) flags(t *testing.T) []string {
	t.Helper()
	if s.Privileged || s.RunAsUser != 0 {
		t.Fatalf("files/security.json: privileged %v, runAsUser %d: the test runs the worker as root, unprivileged", s.Privileged, s.RunAsUser)
	}
	profile, err := filepath.Abs(filepath.Join(chartFiles, s.SeccompProfile))
	if err != nil {
		t.Fatal(err)
	}
	f := []string{"--cap-drop", "ALL", "--cap-add", strings.Join(s.Capabilities, ","),
		"--security-opt", "seccomp=" + profile, "--cgroupns", s.CgroupNamespace, "--user", "0:0"}
	switch s.AppArmorProfile {
	case "Unconfined":
		f = append(f, "--security-opt", "apparmor=unconfined")
	case "RuntimeDefault":
	default:
		t.Fatalf("files/security.json: appArmorProfile %q: the test knows Unconfined and RuntimeDefault", s.AppArmorProfile)
	}
	switch s.ProcMount {
	case "Default":
	case "Unmasked":
		f = append(f, "--security-opt", "unmask=ALL")
	default:
		t.Fatalf("files/security.json: procMount %q", s.ProcMount)
	}
	if !s.AllowPrivilegeEscalation {
		f = append(f, "--security-opt", "no-new-privileges")
	}
	if s.ReadOnlyRootFilesystem {
		f = append(f, "--read-only", "--read-only-tmpfs=false")
	}
	for _, d := range s.WritableDirs {
		f = append(f, "--tmpfs", d+":rw,nosuid,nodev,size=256m")
	}
	return f
}

// host is podman on this machine, with the two images loaded.
type host struct {
	// base are the options of every podman command.
	base []string
	// limits are the rlimits every container gets (see newHost).
	limits                 []string
	workerImage, liveImage string
}

// newHost checks for podman and runc and loads both image archives (from
// AGENTSANDBOX_IMAGE_DIR, default dist/: make image).
func newHost(t *testing.T) *host {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "podman", "apt-get install -y podman")
	runc := testenv.RequireBinary(t, "runc", "apt-get install -y runc")
	dir := os.Getenv("AGENTSANDBOX_IMAGE_DIR")
	if dir == "" {
		dir = "../dist"
	}
	h := &host{
		// runc is what containerd runs on a Kubernetes node; crun 1.8,
		// Debian's default, refuses a hybrid cgroup layout (v1 with a
		// cgroup2 mount that has a controller) outright.
		base: []string{"--runtime", runc, "--log-level", "error"},
		// The runtime's default rlimits (1048576 files) may exceed what
		// this process may give (a host without CAP_SYS_RESOURCE): give
		// the containers this process's own file limit.
		limits: []string{"--ulimit", fmt.Sprintf("nofile=%d:%d", fileLimit(t), fileLimit(t)), "--ulimit", "nproc=4096:4096"},
	}
	for _, img := range []struct {
		file string
		ref  *string
	}{{"codes-sandbox.oci.tar", &h.workerImage}, {"ovlive.oci.tar", &h.liveImage}} {
		p := filepath.Join(dir, img.file)
		if _, err := os.Stat(p); err != nil {
			testenv.Missing(t, fmt.Sprintf("no image archive %s: run make image", p))
		}
		*img.ref = h.load(t, p)
	}
	return h
}

func fileLimit(t *testing.T) uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	return lim.Max
}

var loaded = regexp.MustCompile(`(?m)^Loaded image(?:\(s\))?: (\S+)$`)

// load loads an OCI archive and returns the image's reference.
func (h *host) load(t *testing.T, archive string) string {
	t.Helper()
	out := h.podman(t, "load", "--input", archive)
	m := loaded.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("podman load %s: no image named in %q", archive, out)
	}
	return m[1]
}

// podman runs podman with args and returns its stdout; it fails the test
// with its stderr.
func (h *host) podman(t *testing.T, args ...string) string {
	t.Helper()
	out, err := h.try(args...)
	if err != nil {
		t.Fatalf("podman %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// try runs podman with args and returns its stdout, or an error with its
// stderr.
func (h *host) try(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", append(append([]string{}, h.base...), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// run starts a detached container named name with opts, image and args,
// removed (with its anonymous volumes) when the test ends, and returns its
// id.
func (h *host) run(t *testing.T, name string, opts []string, image string, args ...string) string {
	t.Helper()
	all := append([]string{"run", "--detach", "--pull=never", "--name", name}, h.limits...)
	all = append(append(append(all, opts...), image), args...)
	id := strings.TrimSpace(h.podman(t, all...))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("container %s's log:\n%s", name, h.logs(t, id))
		}
		if _, err := h.try("rm", "--force", "--volumes", "--time", "20", id); err != nil {
			t.Errorf("remove container %s: %v", name, err)
		}
	})
	return id
}

// logs returns what the container wrote to its stdout and stderr.
func (h *host) logs(t *testing.T, id string) string {
	t.Helper()
	out, err := exec.Command("podman", append(append([]string{}, h.base...), "logs", id)...).CombinedOutput()
	if err != nil {
		t.Errorf("podman logs %s: %v", id, err)
	}
	return string(out)
}

// pid returns the host pid of a running container's first process.
func (h *host) pid(t *testing.T, id string) int {
	t.Helper()
	var pid int
	if _, err := fmt.Sscan(h.podman(t, "inspect", "--format", "{{.State.Pid}}", id), &pid); err != nil || pid <= 0 {
		t.Fatalf("container %s has no pid (%v): has it exited?", id, err)
	}
	return pid
}

// nsClient is an HTTP client whose connections are made inside the network
// namespace of pid (a container's, which has only its own loopback).
func nsClient(pid int) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		err := osthread.Run(func() (bool, error) {
			self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return true, err
			}
			defer unix.Close(self)
			target, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return true, err
			}
			defer unix.Close(target)
			if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
				return true, fmt.Errorf("enter the container's network namespace: %w", err)
			}
			conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return unix.Setns(self, unix.CLONE_NEWNET) == nil, err
		})
		return conn, err
	}
	return &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}, Timeout: wait}
}

// eventually calls f until it returns nil or wait has passed, then fails the
// test with its last error.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after %v: %v", what, wait, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

package hostprep

import (
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mountCall is one mount(2) Prepare asked for.
type mountCall struct {
	Source, Target, FSType string
	Flags                  uintptr
}

// Mount tables of a container (masked /proc, read-only cgroups) and a host.
const (
	containerProc = "500 480 0:171 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n" +
		"126 500 0:171 /sys /proc/sys ro,nosuid,nodev,noexec,relatime - proc proc rw\n" +
		"130 500 0:172 /null /proc/kcore rw,nosuid - tmpfs tmpfs rw\n"
	hostProc = "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n" +
		"40 22 0:37 / /proc/sys/fs/binfmt_misc rw,relatime - autofs systemd-1 rw\n"
	// v1, podman without a cgroup namespace: binds of the container's cgroup.
	v1Bound = "535 528 0:31 /libpod_parent/libpod-1 /sys/fs/cgroup/memory ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,memory\n" +
		"536 528 0:35 /libpod_parent/libpod-1 /sys/fs/cgroup/pids ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,pids\n" +
		"537 528 0:32 /libpod_parent/libpod-1 /sys/fs/cgroup/devices ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,devices\n"
	// v2 in a cgroup namespace of its own (Kubernetes on v2), or the host's.
	v2     = "540 528 0:28 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw\n"
	v2Host = "30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw\n"
)

// TestPrepare: in a container Prepare mounts a fresh procfs over a masked
// /proc and remounts read-write the cgroups that are the container's own,
// naming what it cannot do with the fix; on a host it does nothing.
func TestPrepare(t *testing.T) {
	const remount = syscall.MS_REMOUNT | syscall.MS_BIND | syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC | syscall.MS_RELATIME
	procMount := mountCall{"proc", "/proc", "proc", syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC}
	for _, tc := range []struct {
		name       string
		table      string
		namespaced bool
		refuse     bool
		want       []mountCall
		problems   []string // one substring per problem
	}{
		{name: "Host", table: hostProc + v2Host},
		{name: "KubernetesV2", table: containerProc + v2, namespaced: true,
			want: []mountCall{procMount, {"", "/sys/fs/cgroup", "", remount}}},
		{name: "PodmanV1", table: containerProc + v1Bound,
			want: []mountCall{procMount, {"", "/sys/fs/cgroup/memory", "", remount}, {"", "/sys/fs/cgroup/pids", "", remount}}},
		{name: "HostCgroupNamespace", table: containerProc + v2, want: []mountCall{procMount},
			problems: []string{"the cgroup file system (/sys/fs/cgroup) is read-only and shows the host's whole hierarchy (the container " +
				"shares the host's cgroup namespace), so the worker cannot make its sandboxes' cgroups: give the container a cgroup " +
				"namespace of its own (podman or docker --cgroupns=private"}},
		{name: "Refused", table: containerProc + v1Bound, refuse: true,
			want: []mountCall{procMount, {"", "/sys/fs/cgroup/memory", "", remount}, {"", "/sys/fs/cgroup/pids", "", remount}},
			problems: []string{"/proc is masked by the container (/proc/sys, /proc/kcore), so the kernel refuses each sandbox a /proc " +
				"of its own, and the worker could not mount a fresh procfs over it (operation not permitted)",
				"the cgroup file system (/sys/fs/cgroup/memory, /sys/fs/cgroup/pids) is read-only and the worker could not remount"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls []mountCall
			res := Prepare(Options{MountInfo: tc.table, CgroupNamespace: func() bool { return tc.namespaced },
				Mount: func(source, target, fstype string, flags uintptr, _ string) error {
					calls = append(calls, mountCall{source, target, fstype, flags})
					if tc.refuse {
						return syscall.EPERM
					}
					return nil
				}})
			if diff := cmp.Diff(tc.want, calls); diff != "" {
				t.Errorf("mounts (-want +got):\n%s", diff)
			}
			if len(res.Problems) != len(tc.problems) {
				t.Fatalf("problems %q, want %d", res.Problems, len(tc.problems))
			}
			for i, w := range tc.problems {
				if !strings.Contains(res.Problems[i], w) {
					t.Errorf("problem %q does not say %q", res.Problems[i], w)
				}
			}
			if wantDone := len(tc.want); !tc.refuse && len(res.Done) != wantDone {
				t.Errorf("done %q, want %d lines", res.Done, wantDone)
			}
		})
	}
}

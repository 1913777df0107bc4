package hostcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"openvibe.network/agentsandbox/internal/testenv"
)

const fullCaps = "000001ffffffffff"

// fakeHost writes files (relative to a new root) and returns its Host.
func fakeHost(tb testing.TB, files map[string]string) Host {
	tb.Helper()
	root := tb.TempDir()
	for name, s := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return Host{Root: root}
}

func TestProblems(t *testing.T) {
	status := func(caps, seccomp string) string {
		return "Name:\tx\nCapEff:\t" + caps + "\nSeccomp:\t" + seccomp + "\n"
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string // one substring per problem, in order
	}{
		{"Fine", map[string]string{"proc/sys/user/max_user_namespaces": "96364\n", "proc/self/status": status(fullCaps, "0")}, nil},
		{"NothingReadable", nil, nil},
		{"UserNamespacesOff", map[string]string{"proc/sys/user/max_user_namespaces": "0\n"},
			[]string{"sysctl user.max_user_namespaces = 0"}},
		{"UnprivilegedCloneOff", map[string]string{"proc/sys/kernel/unprivileged_userns_clone": "0\n"},
			[]string{"kernel.unprivileged_userns_clone = 0"}},
		{"AppArmorRestricts", map[string]string{"proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n"},
			[]string{"AppArmor restricts unprivileged user namespaces"}},
		{"AppArmorWithBwrapProfile", map[string]string{"proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n",
			"etc/apparmor.d/bwrap-userns-restrict": "profile bwrap /usr/bin/bwrap flags=(unconfined) {\n  userns,\n}\n"}, nil},
		// Docker's and containerd's default capabilities.
		{"DefaultContainer", map[string]string{"proc/self/status": status("00000000a80425fb", "2")},
			[]string{"the worker lacks CAP_SYS_PTRACE, CAP_SYS_ADMIN (it runs each sandbox as its slot's uid, mounts its file systems " +
				"and cgroups, reads and kills its processes): add them to its container (podman or docker --cap-add SYS_PTRACE,SYS_ADMIN; " +
				"Kubernetes securityContext.capabilities.add: docs/kubernetes.md)"}},
		// Exactly deploy/kubernetes/agentsandbox/files/security.json's.
		{"LeastPrivilege", map[string]string{"proc/self/status": status("00000000002800e9", "2")}, nil},
		{"Several", map[string]string{"proc/sys/user/max_user_namespaces": "0", "proc/self/status": status("0", "0")},
			[]string{"max_user_namespaces", "lacks CAP_CHOWN, CAP_FOWNER, CAP_KILL, CAP_SETGID, CAP_SETUID, CAP_SYS_PTRACE, CAP_SYS_ADMIN"}},
		{"ContainerAppArmor", map[string]string{"proc/self/attr/apparmor/current": "cri-containerd.apparmor.d (enforce)\n"},
			[]string{"the AppArmor profile cri-containerd.apparmor.d (enforce), a container runtime's default, which denies mount"}},
		{"AppArmorUnconfined", map[string]string{"proc/self/attr/apparmor/current": "unconfined\n"}, nil},
		{"AppArmorOwnProfile", map[string]string{"proc/self/attr/current": "codes-sandbox (enforce)"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fakeHost(t, tc.files).Problems()
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d %q does not say %q", i, got[i], w)
				}
			}
		})
	}
}

func TestExplain(t *testing.T) {
	container := fakeHost(t, map[string]string{"proc/self/status": "CapEff:\t" + fullCaps + "\nSeccomp:\t2\n"})
	masked := fakeHost(t, map[string]string{"proc/self/status": "CapEff:\t" + fullCaps + "\nSeccomp:\t0\n",
		"proc/self/mountinfo": "500 480 0:171 / /proc rw,nosuid - proc proc rw\n" +
			"126 500 0:171 /sys /proc/sys ro,nosuid - proc proc rw\n130 500 0:172 /null /proc/keys rw - tmpfs tmpfs rw\n"})
	unmasked := fakeHost(t, map[string]string{"proc/self/status": "CapEff:\t" + fullCaps + "\nSeccomp:\t0\n",
		"proc/self/mountinfo": "500 480 0:171 / /proc rw,nosuid - proc proc rw\n126 500 0:171 /sys /proc/sys ro,nosuid - proc proc rw\n" +
			"700 480 0:180 / /proc rw,nosuid - proc proc rw\n"})
	for _, tc := range []struct {
		name string
		host Host
		msg  string
		want string
	}{
		{"SeccompRefusal", container, "bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces",
			"runs under a seccomp filter"},
		{"SeccompOtherFailure", container, "bwrap: execvp /x: No such file or directory", ""},
		{"PlainHost", fakeHost(t, map[string]string{"proc/self/status": "CapEff:\t" + fullCaps + "\nSeccomp:\t0\n"}), "bwrap: Operation not permitted", ""},
		{"MaskedProc", masked, "bwrap: Can't mount proc on /newroot/proc: Operation not permitted",
			"/proc is masked by the worker's container (/proc/sys, /proc/keys)"},
		{"UnmaskedOverMasked", unmasked, "bwrap: Can't mount proc on /newroot/proc: Operation not permitted", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.host.Explain(tc.msg)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("Explain = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestThisHost: the machine the tests run on has none of these problems
// (they would make every sandbox test fail with a less clear message).
func TestThisHost(t *testing.T) {
	testenv.RequireRoot(t) // as another user CAP_SYS_ADMIN is missing by design
	if p := (Host{Root: "/"}).Problems(); len(p) != 0 {
		t.Fatalf("this host: %q", p)
	}
}

// TestNamespaceRefusal: a refused namespace is blamed on the seccomp filter
// or the AppArmor profile the worker runs under, with the fix; on a host
// with other problems, on those.
func TestNamespaceRefusal(t *testing.T) {
	refused := fmt.Errorf("create the namespaces of a sandbox: %w", &os.SyscallError{Syscall: "clone", Err: syscall.EPERM})
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"Seccomp", map[string]string{"proc/self/status": "CapEff:\t" + fullCaps + "\nSeccomp:\t2\n"},
			[]string{"the seccomp filter the worker runs under refuses the namespaces every sandbox needs (clone with CLONE_NEWUSER, " +
				"CLONE_NEWNS…: operation not permitted): run its container with the profile /usr/share/codes-sandbox/seccomp.json"}},
		{"AppArmor", map[string]string{"proc/self/status": "CapEff:\t" + fullCaps + "\nSeccomp:\t0\n",
			"proc/self/attr/apparmor/current": "my-profile (enforce)"}, []string{"the AppArmor profile my-profile (enforce)", "apparmor=unconfined"}},
		{"OtherProblems", map[string]string{"proc/sys/user/max_user_namespaces": "0"}, []string{"user.max_user_namespaces = 0"}},
		{"Unknown", nil, []string{"check the kernel's user namespace settings"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fakeHost(t, tc.files).NamespaceRefusal(refused)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("NamespaceRefusal = %q, want it to say %q", got, w)
				}
			}
		})
	}
}

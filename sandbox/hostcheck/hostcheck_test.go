package hostcheck

import (
	"os"
	"path/filepath"
	"strings"
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
		{"NoSysAdmin", map[string]string{"proc/self/status": status("00000000a80425fb", "2")}, []string{"lacks CAP_SYS_ADMIN"}},
		{"Several", map[string]string{"proc/sys/user/max_user_namespaces": "0", "proc/self/status": status("0", "0")},
			[]string{"max_user_namespaces", "lacks CAP_SYS_ADMIN"}},
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

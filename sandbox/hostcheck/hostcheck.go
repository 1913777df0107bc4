// Package hostcheck says why a host cannot run sandboxes, in words a person
// can act on: user namespaces disabled or restricted (naming the sysctl or
// the AppArmor setting and the fix), or the worker itself inside a
// container whose seccomp filter or missing capabilities forbid the
// namespaces and mounts a sandbox needs. It only reads files; nothing here
// tries a namespace.
package hostcheck

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Host is the machine whose files are read under Root ("/" for this one;
// tests give a directory that imitates it).
type Host struct {
	Root string
}

// Capabilities the worker needs (bit numbers of linux/capability.h).
const (
	capSetGID   = 6
	capSetUID   = 7
	capSysAdmin = 21
)

// Problems returns what the host forbids that sandboxes need, each with the
// fix; empty when nothing it knows of is wrong.
func (h Host) Problems() []string {
	var out []string
	if n, ok := h.sysctl("user/max_user_namespaces"); ok && n == 0 {
		out = append(out, "user namespaces are disabled (sysctl user.max_user_namespaces = 0), and every sandbox is one: "+
			"set it to 15000 or more (echo user.max_user_namespaces=15000 > /etc/sysctl.d/90-codes-sandbox.conf; sysctl --system)")
	}
	if n, ok := h.sysctl("kernel/unprivileged_userns_clone"); ok && n == 0 {
		out = append(out, "unprivileged user namespaces are disabled (sysctl kernel.unprivileged_userns_clone = 0), and bubblewrap "+
			"creates each sandbox's as its unprivileged uid: set kernel.unprivileged_userns_clone=1 in /etc/sysctl.d/ and run sysctl --system")
	}
	if n, ok := h.sysctl("kernel/apparmor_restrict_unprivileged_userns"); ok && n == 1 && !h.bwrapProfile() {
		out = append(out, "AppArmor restricts unprivileged user namespaces (sysctl kernel.apparmor_restrict_unprivileged_userns = 1) "+
			"and no AppArmor profile lets bubblewrap create them: install one (Ubuntu: apt-get install apparmor-profiles, which ships "+
			"/etc/apparmor.d/bwrap-userns-restrict; or a profile for /usr/bin/bwrap with the `userns,` rule) and reload AppArmor")
	}
	if caps, ok := h.status("CapEff"); ok {
		if mask, err := strconv.ParseUint(caps, 16, 64); err == nil {
			for _, c := range []struct {
				bit  uint
				name string
			}{{capSysAdmin, "CAP_SYS_ADMIN"}, {capSetUID, "CAP_SETUID"}, {capSetGID, "CAP_SETGID"}} {
				if mask&(1<<c.bit) == 0 {
					out = append(out, "the worker lacks "+c.name+" (it mounts each sandbox's file systems and runs it as its own uid): "+
						"run it as root on the host, or its container with --cap-add SYS_ADMIN --cap-add SETUID --cap-add SETGID (or --privileged)")
					break
				}
			}
		}
	}
	return out
}

// Explain returns, for a sandbox that failed to start with bubblewrap's
// message msg, what on this host causes it: the Problems, and a seccomp
// filter the worker itself runs under when the failure is a refusal; "" when
// it knows of no cause.
func (h Host) Explain(msg string) string {
	causes := h.Problems()
	if refused(msg) {
		if mode, ok := h.status("Seccomp"); ok && mode == "2" {
			causes = append(causes, "the worker itself runs under a seccomp filter (a container's default profile?) that may refuse "+
				"the namespaces bubblewrap needs: run its container with a profile that allows unshare, clone and mount with namespace flags "+
				"(docker run --security-opt seccomp=unconfined, or --privileged), or the worker on the host")
		}
	}
	return strings.Join(causes, "; ")
}

// refused reports whether a bubblewrap message is a permission refusal.
func refused(msg string) bool {
	for _, s := range []string{"Operation not permitted", "Permission denied", "No permissions to creat"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// sysctl reads /proc/sys/NAME as a number; false when there is none.
func (h Host) sysctl(name string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(h.Root, "proc/sys", name))
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil
}

// status returns a field of /proc/self/status.
func (h Host) status(key string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(h.Root, "proc/self/status"))
	if err != nil {
		return "", false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// bwrapProfile reports whether an AppArmor profile names bubblewrap and
// allows user namespaces.
func (h Host) bwrapProfile() bool {
	files, _ := filepath.Glob(filepath.Join(h.Root, "etc/apparmor.d/*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), "bwrap") && strings.Contains(string(b), "userns") {
			return true
		}
	}
	return false
}

// Package hostcheck says why a host cannot run sandboxes, in words a person
// can act on: user namespaces disabled or restricted (naming the sysctl or
// the AppArmor setting and the fix), or the worker itself inside a
// container whose missing capabilities, seccomp filter, AppArmor profile or
// masked /proc forbid the namespaces and mounts a sandbox needs, each with
// the container setting that fixes it. It only reads files; nothing here
// tries a namespace (package hostprep does, and readies a container).
package hostcheck

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"openvibe.network/agentsandbox/internal/mountinfo"
)

// Host is the machine whose files are read under Root ("/" for this one;
// tests give a directory that imitates it).
type Host struct {
	Root string
}

// Capabilities the worker needs, by bit number (linux/capability.h). A
// container that runs the worker gives it exactly these
// (deploy/kubernetes/agentsandbox/files/security.json, which the podman
// test proves).
var capabilities = []struct {
	bit  uint
	name string
}{
	{0, "CAP_CHOWN"}, {3, "CAP_FOWNER"}, {5, "CAP_KILL"}, {6, "CAP_SETGID"}, {7, "CAP_SETUID"},
	{19, "CAP_SYS_PTRACE"}, {21, "CAP_SYS_ADMIN"},
}

// defaultAppArmor are the names of container runtimes' default AppArmor
// profiles, each of which denies mount.
var defaultAppArmor = []string{"docker-default", "cri-containerd.apparmor.d", "containers-default"}

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
	if p := h.missingCapabilities(); p != "" {
		out = append(out, p)
	}
	if p, ok := h.appArmorProfile(); ok {
		out = append(out, "the worker runs under the AppArmor profile "+p+", a container runtime's default, which denies mount "+
			"(every sandbox needs its own): run its container unconfined (podman or docker --security-opt apparmor=unconfined; "+
			"Kubernetes securityContext.appArmorProfile.type: Unconfined) or under a profile that allows mount, pivot_root and userns")
	}
	return out
}

// missingCapabilities names every capability the worker lacks, what each
// is for and the fix; "" when it has them all (or the status is unreadable).
func (h Host) missingCapabilities() string {
	caps, ok := h.status("CapEff")
	if !ok {
		return ""
	}
	mask, err := strconv.ParseUint(caps, 16, 64)
	if err != nil {
		return ""
	}
	var names, flags []string
	for _, c := range capabilities {
		if mask&(1<<c.bit) == 0 {
			names = append(names, c.name)
			flags = append(flags, strings.TrimPrefix(c.name, "CAP_"))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "the worker lacks " + strings.Join(names, ", ") + " (it runs each sandbox as its slot's uid, mounts its file systems " +
		"and cgroups, reads and kills its processes): add them to its container (podman or docker --cap-add " + strings.Join(flags, ",") +
		"; Kubernetes securityContext.capabilities.add: docs/kubernetes.md)"
}

// appArmorProfile returns the container runtime's default AppArmor profile
// the worker is confined by in enforce mode ("docker-default (enforce)"),
// false when it is unconfined or under another profile.
func (h Host) appArmorProfile() (string, bool) {
	label, ok := h.appArmorLabel()
	if !ok || !strings.HasSuffix(label, "(enforce)") {
		return "", false
	}
	for _, d := range defaultAppArmor {
		if strings.HasPrefix(label, d) {
			return label, true
		}
	}
	return "", false
}

// appArmorLabel returns the AppArmor label of the worker ("unconfined",
// "docker-default (enforce)"), false when AppArmor is off.
func (h Host) appArmorLabel() (string, bool) {
	for _, f := range []string{"proc/self/attr/apparmor/current", "proc/self/attr/current"} {
		b, err := os.ReadFile(filepath.Join(h.Root, f))
		if err == nil {
			return strings.TrimSpace(strings.TrimRight(string(b), "\x00\n")), true
		}
	}
	return "", false
}

// maskedProc returns the mounts that cover parts of this process's /proc
// (a container runtime's masks), apart from the kernel's own mount point.
func (h Host) maskedProc() []string {
	b, err := os.ReadFile(filepath.Join(h.Root, "proc/self/mountinfo"))
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range mountinfo.Covering(mountinfo.Parse(string(b)), "/proc") {
		if p != "/proc/sys/fs/binfmt_misc" {
			out = append(out, p)
		}
	}
	return out
}

// Explain returns, for a sandbox that failed to start with bubblewrap's
// message msg, what on this host causes it: the Problems, a masked /proc
// when bubblewrap could not mount a sandbox's, and a seccomp filter the
// worker itself runs under when the failure is a refusal; "" when it knows
// of no cause.
func (h Host) Explain(msg string) string {
	causes := h.Problems()
	if strings.Contains(msg, "Can't mount proc") {
		if masked := h.maskedProc(); len(masked) > 0 {
			causes = append(causes, "/proc is masked by the worker's container ("+strings.Join(masked, ", ")+"), so the kernel refuses "+
				"each sandbox a /proc of its own: the worker mounts a fresh procfs over it at start when it may (CAP_SYS_ADMIN, "+
				"a seccomp and AppArmor profile that allow mount), or unmask /proc (podman --security-opt unmask=ALL; "+
				"Kubernetes securityContext.procMount: Unmasked)")
		}
	}
	if refused(msg) {
		if mode, ok := h.status("Seccomp"); ok && mode == "2" {
			causes = append(causes, "the worker itself runs under a seccomp filter (a container's default profile?) that may refuse "+
				"the namespaces bubblewrap needs: run its container with a profile that allows unshare, clone and mount with namespace flags "+
				"(the image's /usr/share/codes-sandbox/seccomp.json: podman or docker --security-opt seccomp=FILE, Kubernetes seccompProfile type Localhost), "+
				"or the worker on the host")
		}
	}
	return strings.Join(causes, "; ")
}

// NamespaceRefusal explains why creating the namespaces of a sandbox
// failed with err on this host: the Problems, else the seccomp filter or
// the AppArmor profile the worker runs under.
func (h Host) NamespaceRefusal(err error) string {
	if p := h.Problems(); len(p) > 0 {
		return strings.Join(p, "; ")
	}
	var causes []string
	if mode, ok := h.status("Seccomp"); ok && mode == "2" {
		causes = append(causes, "the seccomp filter the worker runs under refuses the namespaces every sandbox needs "+
			"(clone with CLONE_NEWUSER, CLONE_NEWNS…: "+errno(err)+"): run its container with the profile "+
			"/usr/share/codes-sandbox/seccomp.json, which allows them (podman or docker --security-opt "+
			"seccomp=/usr/share/codes-sandbox/seccomp.json; Kubernetes securityContext.seccompProfile type Localhost)")
	}
	if label, ok := h.appArmorLabel(); ok && strings.HasSuffix(label, "(enforce)") {
		causes = append(causes, "the worker runs under the AppArmor profile "+label+", which may refuse them: run it unconfined "+
			"(--security-opt apparmor=unconfined; Kubernetes appArmorProfile type Unconfined)")
	}
	if len(causes) == 0 {
		return "this host refuses the namespaces every sandbox needs (" + err.Error() + "): check the kernel's user namespace settings (docs/hosts.md)"
	}
	return strings.Join(causes, "; ")
}

// errno is the kernel's words in err ("operation not permitted"), without
// the operation's.
func errno(err error) string {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e.Error()
	}
	return err.Error()
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

// Package hostprep readies the container a worker runs in for sandboxes,
// doing only what is the container's own and only where a container
// runtime has taken it away:
//
//   - /proc is masked (the runtime covers /proc/kcore, /proc/sys, … with
//     other mounts, and mounts /proc/sys read-only): the kernel then
//     refuses a new /proc in a user namespace (bubblewrap's --proc) unless
//     some /proc of the mount namespace is fully visible, and bubblewrap
//     cannot write the sysctls it sets in each sandbox's user namespace.
//     Prepare mounts a fresh procfs over /proc, in the container's own
//     mount namespace: what Kubernetes' procMount: Unmasked would give,
//     without asking for it (it needs a user namespace for the pod);
//   - the cgroup file system is mounted read-only: when the mount is the
//     container's own cgroup (in a cgroup namespace of its own, or a bind
//     mount of its cgroup), Prepare remounts it read-write — that cgroup
//     is delegated to the worker, which makes its sandboxes' groups below
//     it. A read-only view of the host's whole hierarchy is left alone.
//
// Both need CAP_SYS_ADMIN, which the worker needs anyway. On a host
// (nothing masked, cgroups writable) Prepare does nothing. What it cannot
// do is a problem with its fix, in words a person can act on; see also
// package hostcheck, which says what else a host lacks.
package hostprep

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/internal/mountinfo"
	"openvibe.network/agentsandbox/sandbox/cgroup"
)

// DefaultCgroupRoot is where the cgroup file systems are mounted.
const DefaultCgroupRoot = "/sys/fs/cgroup"

// cgroupControllers are the v1 hierarchies the runtime uses (the others
// stay as the container runtime mounted them).
var cgroupControllers = []string{"memory", "pids", "cpu", "cpuacct", "freezer"}

// Options say where Prepare works; zero fields take the defaults.
type Options struct {
	// Proc is where the procfs is mounted (default /proc).
	Proc string
	// CgroupRoot is where the cgroup file systems are (default
	// /sys/fs/cgroup).
	CgroupRoot string
	// MountInfo is the text of /proc/self/mountinfo; empty reads the file.
	MountInfo string
	// CgroupNamespace reports whether this process is in a cgroup
	// namespace of its own; nil: cgroup.InNamespace.
	CgroupNamespace func() bool
	// Mount is mount(2); nil means unix.Mount (tests replace it).
	Mount func(source, target, fstype string, flags uintptr, data string) error
}

// Result is what Prepare did and could not do.
type Result struct {
	// Done says, for the log, what Prepare changed.
	Done []string
	// Problems say what it could not do, each with its fix.
	Problems []string
}

// Prepare mounts a fresh procfs over /proc when /proc is masked and
// remounts read-write the container's own cgroup file systems that are
// read-only (see the package doc). It never fails: what it cannot do is in
// Result.Problems. Running it again (a second command in the same
// container) finds nothing left to do.
func Prepare(opts Options) Result {
	opts.Proc = filepath.Clean(cmp.Or(opts.Proc, "/proc"))
	opts.CgroupRoot = filepath.Clean(cmp.Or(opts.CgroupRoot, DefaultCgroupRoot))
	if opts.Mount == nil {
		opts.Mount = unix.Mount
	}
	if opts.CgroupNamespace == nil {
		opts.CgroupNamespace = cgroup.InNamespace
	}
	var res Result
	text := opts.MountInfo
	if text == "" {
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("cannot read the mount table to ready this host for sandboxes: %v", err))
			return res
		}
		text = string(b)
	}
	mounts := mountinfo.Parse(text)
	prepareProc(opts, mounts, &res)
	prepareCgroups(opts, mounts, &res)
	return res
}

// Masked returns the mounts that now cover parts of the procfs at proc (a
// container runtime's masks), apart from the kernel's own empty mount
// point for binfmt_misc.
func Masked(mounts []mountinfo.Mount, proc string) []string {
	var out []string
	for _, p := range mountinfo.Covering(mounts, proc) {
		if p != proc+"/sys/fs/binfmt_misc" {
			out = append(out, p)
		}
	}
	return out
}

// prepareProc mounts a fresh procfs over opts.Proc when it is masked.
func prepareProc(opts Options, mounts []mountinfo.Mount, res *Result) {
	masked := Masked(mounts, opts.Proc)
	if len(masked) == 0 {
		return
	}
	if err := opts.Mount("proc", opts.Proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		res.Problems = append(res.Problems, fmt.Sprintf("%s is masked by the container (%s), so the kernel refuses each sandbox "+
			"a /proc of its own, and the worker could not mount a fresh procfs over it (%s): give it CAP_SYS_ADMIN and a seccomp and "+
			"AppArmor profile that allow mount (the seccomp profile /usr/share/codes-sandbox/seccomp.json; AppArmor unconfined), or unmask /proc "+
			"(podman --security-opt unmask=ALL; Kubernetes securityContext.procMount: Unmasked)",
			opts.Proc, summarize(masked), errText(err)))
		return
	}
	res.Done = append(res.Done, fmt.Sprintf("mounted a fresh procfs over %s in the container's mount namespace: the container masks it (%s)",
		opts.Proc, summarize(masked)))
}

// prepareCgroups remounts read-write each read-only cgroup file system the
// runtime uses that is the container's own; what it cannot is one problem
// naming every such mount.
func prepareCgroups(opts Options, mounts []mountinfo.Mount, res *Result) {
	namespaced := opts.CgroupNamespace()
	var hostWide, refused []string
	var why error
	for _, m := range mounts {
		if !used(m, opts.CgroupRoot) || !m.ReadOnly() {
			continue
		}
		if !namespaced && m.Root == "/" {
			hostWide = append(hostWide, m.Point)
			continue
		}
		flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
		if slices.Contains(m.Options, "relatime") {
			flags |= unix.MS_RELATIME
		}
		if err := opts.Mount("", m.Point, "", flags, ""); err != nil {
			refused, why = append(refused, m.Point), err
			continue
		}
		res.Done = append(res.Done, fmt.Sprintf("remounted the container's own cgroup at %s read-write (the cgroup %s, delegated to the worker)",
			m.Point, m.Root))
	}
	if len(hostWide) > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("the cgroup file system (%s) is read-only and shows the host's whole hierarchy "+
			"(the container shares the host's cgroup namespace), so the worker cannot make its sandboxes' cgroups: give the container "+
			"a cgroup namespace of its own (podman or docker --cgroupns=private; Kubernetes nodes on cgroup v2 give one), "+
			"whose cgroup the worker then makes writable", summarize(hostWide)))
	}
	if len(refused) > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("the cgroup file system (%s) is read-only and the worker could not remount "+
			"its container's own cgroup read-write (%s), so it cannot make its sandboxes' cgroups: give it CAP_SYS_ADMIN and a "+
			"seccomp and AppArmor profile that allow mount (the seccomp profile /usr/share/codes-sandbox/seccomp.json; AppArmor unconfined)",
			summarize(refused), errText(why)))
	}
}

// used reports whether m is a cgroup file system under root that the
// runtime uses: the v2 hierarchy, or a v1 one of its controllers.
func used(m mountinfo.Mount, root string) bool {
	if m.Point != root && !strings.HasPrefix(m.Point, root+"/") {
		return false
	}
	switch m.FSType {
	case "cgroup2":
		return true
	case "cgroup":
		return slices.ContainsFunc(cgroupControllers, m.Has)
	}
	return false
}

// summarize names the first few masked paths.
func summarize(paths []string) string {
	if len(paths) > 4 {
		return strings.Join(paths[:4], ", ") + fmt.Sprintf(" and %d more", len(paths)-4)
	}
	return strings.Join(paths, ", ")
}

// errText is the kernel's words for a failed mount ("operation not
// permitted").
func errText(err error) string {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e.Error()
	}
	return err.Error()
}

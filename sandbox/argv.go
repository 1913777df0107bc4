package sandbox

import (
	"maps"
	"slices"
	"strconv"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox/control"
)

// Workspace is the sandbox's working directory and home (see
// control.Workspace).
const Workspace = control.Workspace

// The writable directories of a sandbox: each is a directory of the one
// tmpfs the runtime mounts for it (BwrapSpec.WritableDir), bound at its path.
var writableDirs = []struct{ name, path string }{
	{"workspace", Workspace},
	{"tmp", "/tmp"},
	{"shm", "/dev/shm"},
}

// BwrapSpec is everything Argv needs: the resolved options of one sandbox
// and the host paths of its parts.
type BwrapSpec struct {
	// InitBinary is the host path of the init binary (bound read-only at
	// control.InitPath); InitArgs are its arguments after the program name.
	InitBinary string
	InitArgs   []string
	// WritableDir is the root of the sandbox's tmpfs on the host (mounted by
	// the runtime with a size and an inode cap); its directories workspace,
	// tmp and shm are bound at /workspace, /tmp and /dev/shm. Nothing else
	// the sandbox sees is writable.
	WritableDir string
	// PtsDir is the sandbox's own devpts instance on the host (mounted by the
	// runtime with a pty cap), bound at /dev/pts.
	PtsDir string
	// EtcDir is the prepared /etc (see buildEtc), bound read-only.
	EtcDir string
	// EtcBinds are host /etc directories (relative to /etc, see
	// etcHostDirs) bound read-only over the copy's empty ones.
	EtcBinds []string
	// UsrLinks maps top-level names to their symlink targets, e.g.
	// "bin" -> "usr/bin" (the host's merged-/usr layout).
	UsrLinks map[string]string
	Hostname string
	// Env is the init's whole environment (bwrap --clearenv, then these).
	// It holds no secret: Options.Env reaches the init through its spec.
	Env map[string]string
	// SeccompFD is the fd bwrap reads the BPF program from.
	SeccompFD int
	// InfoFD, when positive, makes bwrap report the sandbox's host pid.
	InfoFD int
	// Exec, when set, is what the sandbox runs instead of the init (a
	// one-command sandbox whose limits a program of the host's /usr sets:
	// see capExecArgv); the init binary is then not bound.
	Exec []string
	// BlockFD, when positive, makes bwrap wait for a byte on it before it
	// runs the command (the runtime writes it once the sandbox is in its
	// cgroup). Bubblewrap goes on at end of file too: the runtime kills it
	// before it closes the pipe without that byte.
	BlockFD int
	// Root, when set, is the host path of the sandbox's root (an image's
	// overlay, writable into the sandbox's tmpfs), bound at / in place of
	// the host's /usr and the prepared /etc; UID and GID are then the
	// sandbox user's ids inside (the image's user), else
	// control.SandboxUID and SandboxGID.
	Root     string
	UID, GID int
	// CABundle, when set, is the host path of the sandbox's own trust
	// bundle (a sandbox with secrets: see setupSecrets), bound read-only
	// at agentsandbox.SandboxCABundle over the host's or the image's.
	CABundle string
	// CABundleAlso are more paths inside the sandbox (an image's own
	// bundles: see imageCABundles) CABundle is bound over too.
	CABundleAlso []string
	// ProcMask is what the sandbox's /proc hides of the host's kernel (see
	// hostProcMask).
	ProcMask ProcMask
	// BootID, when set, is the host path of the sandbox's own boot id (see
	// writeBootID), bound read-only over the kernel's at bootIDPath.
	BootID string
}

// Argv returns the bubblewrap options and command (without the program
// name) for spec: every namespace unshared and nested user namespaces
// disabled, all capabilities dropped, a new session, die-with-parent, the
// command as the sandbox's pid 1 (so that bubblewrap's own process reaps
// it: no orphan is left for the host's init when the sandbox ends), a
// cleared environment, a read-only view of /usr and the few /etc files
// programs need, fresh /proc with the host's kernel-wide files masked
// (ProcMask) and the sandbox's own boot id, a /dev that is read-only but for the
// sandbox's own capped devpts and /dev/shm, the capped tmpfs directories at
// /workspace and /tmp, the sandbox user, the seccomp filter; and the init
// as the command (for a one-command sandbox, InitArgs make it set the
// limits and become the command), or Exec. It is a pure function. The runtime
// hands the options to bubblewrap through `--args FD`, never on a command
// line (they hold the environment); the command follows `--` on bwrap's
// own command line, as bubblewrap requires.
func Argv(spec BwrapSpec) (options, command []string) {
	uid, gid := control.SandboxUID, control.SandboxGID
	if spec.Root != "" {
		uid, gid = spec.UID, spec.GID
	}
	a := []string{
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--cap-drop", "ALL",
		"--new-session", "--die-with-parent", "--as-pid-1",
		"--uid", strconv.Itoa(uid), "--gid", strconv.Itoa(gid),
		"--hostname", spec.Hostname,
		"--clearenv",
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		a = append(a, "--setenv", k, spec.Env[k])
	}
	if spec.Root != "" {
		a = append(a, "--bind", spec.Root, "/")
	} else {
		a = append(a, "--ro-bind", "/usr", "/usr")
		for _, name := range slices.Sorted(maps.Keys(spec.UsrLinks)) {
			a = append(a, "--symlink", spec.UsrLinks[name], "/"+name)
		}
		a = append(a, "--ro-bind", spec.EtcDir, "/etc")
		for _, d := range spec.EtcBinds {
			a = append(a, "--ro-bind", "/etc/"+d, "/etc/"+d)
		}
	}
	if spec.CABundle != "" {
		a = append(a, "--ro-bind", spec.CABundle, agentsandbox.SandboxCABundle)
		for _, p := range spec.CABundleAlso {
			a = append(a, "--ro-bind", spec.CABundle, p)
		}
	}
	a = append(a, "--proc", "/proc")
	for _, f := range spec.ProcMask.Files {
		a = append(a, "--ro-bind", "/dev/null", "/proc/"+f)
	}
	for _, d := range spec.ProcMask.Dirs {
		a = append(a, "--tmpfs", "/proc/"+d, "--remount-ro", "/proc/"+d)
	}
	if spec.BootID != "" {
		a = append(a, "--ro-bind", spec.BootID, bootIDPath)
	}
	a = append(a,
		"--dev", "/dev",
		"--dev-bind", spec.PtsDir, "/dev/pts",
	)
	for _, d := range writableDirs {
		a = append(a, "--bind", spec.WritableDir+"/"+d.name, d.path)
	}
	if len(spec.Exec) == 0 {
		a = append(a, "--ro-bind", spec.InitBinary, control.InitPath)
	}
	a = append(a, "--remount-ro", "/dev")
	if spec.Root == "" {
		a = append(a, "--remount-ro", "/")
	}
	a = append(a,
		"--chdir", Workspace,
		"--seccomp", strconv.Itoa(spec.SeccompFD),
	)
	if spec.InfoFD > 0 {
		a = append(a, "--info-fd", strconv.Itoa(spec.InfoFD))
	}
	if spec.BlockFD > 0 {
		a = append(a, "--block-fd", strconv.Itoa(spec.BlockFD))
	}
	if len(spec.Exec) > 0 {
		return a, slices.Clone(spec.Exec)
	}
	return a, append([]string{control.InitPath}, spec.InitArgs...)
}

// argsFile encodes options for `bwrap --args FD`: every argument followed
// by a NUL byte (none may hold one: resolve refuses NUL in the env).
func argsFile(argv []string) []byte {
	n := 0
	for _, s := range argv {
		n += len(s) + 1
	}
	out := make([]byte, 0, n)
	for _, s := range argv {
		out = append(append(out, s...), 0)
	}
	return out
}

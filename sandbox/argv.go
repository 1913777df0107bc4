package sandbox

import (
	"maps"
	"slices"
	"strconv"
)

// Paths inside every sandbox.
const (
	// Workspace is the sandbox's size-capped tmpfs, its home and working
	// directory.
	Workspace = "/workspace"
	// ControlDir is where the per-sandbox host directory (control socket,
	// egress socket) is bound inside the sandbox.
	ControlDir = "/.sandbox"
	// InitPath is where the init binary is bound inside the sandbox.
	InitPath = "/.init"
	// EgressSocket is the egress proxy socket as the init sees it.
	EgressSocket = ControlDir + "/egress.sock"
	// SandboxUID and SandboxGID are the user and group of the sandbox's
	// processes as seen inside (mapped to the slot's host uid).
	SandboxUID = 1000
	SandboxGID = 1000

	controlSocket = ControlDir + "/ctl.sock"
)

// BwrapSpec is everything Argv needs: the resolved options of one sandbox
// and the host paths of its parts.
type BwrapSpec struct {
	// InitBinary is the host path of the init binary (bound read-only at
	// InitPath); InitArgs are its arguments after the program name.
	InitBinary string
	InitArgs   []string
	// ControlDir is the per-sandbox host directory bound at ControlDir.
	ControlDir string
	// Command, when set, is run instead of the init (a one-command sandbox,
	// see Runtime.Run); InitBinary, InitArgs and ControlDir are then unused.
	Command []string
	// EtcDir is the prepared /etc (see buildEtc), bound read-only.
	EtcDir string
	// UsrLinks maps top-level names to their symlink targets, e.g.
	// "bin" -> "usr/bin" (the host's merged-/usr layout).
	UsrLinks map[string]string
	// DiskBytes caps /workspace, TmpBytes /tmp and /dev/shm.
	DiskBytes int64
	TmpBytes  int64
	Hostname  string
	// Env is the init's whole environment (bwrap --clearenv, then these).
	Env map[string]string
	// SeccompFD is the fd bwrap reads the BPF program from.
	SeccompFD int
	// InfoFD and BlockFD, when positive, make bwrap report the sandbox's
	// host pid and wait before starting the init.
	InfoFD  int
	BlockFD int
}

// Argv returns the bubblewrap arguments (without the program name) for spec:
// every namespace unshared and nested user namespaces disabled, all
// capabilities dropped, a new session, die-with-parent, the command as the
// sandbox's pid 1 (so that bubblewrap's own process reaps it: no orphan is
// left for the host's init when the sandbox ends), a cleared
// environment, a read-only view of /usr and the few /etc files programs need,
// fresh /proc and /dev, tmpfs /workspace and /tmp, the sandbox user, the
// seccomp filter, and the init (or spec.Command) as the command. It is a
// pure function.
func Argv(spec BwrapSpec) []string {
	a := []string{
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--cap-drop", "ALL",
		"--new-session", "--die-with-parent", "--as-pid-1",
		"--uid", strconv.Itoa(SandboxUID), "--gid", strconv.Itoa(SandboxGID),
		"--hostname", spec.Hostname,
		"--clearenv",
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		a = append(a, "--setenv", k, spec.Env[k])
	}
	a = append(a, "--ro-bind", "/usr", "/usr")
	for _, name := range slices.Sorted(maps.Keys(spec.UsrLinks)) {
		a = append(a, "--symlink", spec.UsrLinks[name], "/"+name)
	}
	a = append(a,
		"--ro-bind", spec.EtcDir, "/etc",
		"--proc", "/proc",
		"--dev", "/dev",
		"--size", strconv.FormatInt(spec.TmpBytes, 10), "--tmpfs", "/dev/shm",
		"--size", strconv.FormatInt(spec.TmpBytes, 10), "--tmpfs", "/tmp",
		"--size", strconv.FormatInt(spec.DiskBytes, 10), "--tmpfs", Workspace,
	)
	if len(spec.Command) == 0 {
		a = append(a, "--bind", spec.ControlDir, ControlDir, "--ro-bind", spec.InitBinary, InitPath)
	}
	a = append(a,
		"--remount-ro", "/",
		"--chdir", Workspace,
		"--seccomp", strconv.Itoa(spec.SeccompFD),
	)
	if spec.InfoFD > 0 {
		a = append(a, "--info-fd", strconv.Itoa(spec.InfoFD))
	}
	if spec.BlockFD > 0 {
		a = append(a, "--block-fd", strconv.Itoa(spec.BlockFD))
	}
	if len(spec.Command) > 0 {
		return append(append(a, "--"), spec.Command...)
	}
	a = append(a, "--", InitPath)
	return append(a, spec.InitArgs...)
}

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
	// EtcDir holds generated /etc files (EtcGenerated names, e.g. passwd).
	EtcDir       string
	EtcGenerated []string
	// EtcHost lists host /etc entries bound read-only when they exist.
	EtcHost []string
	// UsrLinks maps top-level names to their symlink targets, e.g.
	// "bin" -> "usr/bin" (the host's merged-/usr layout).
	UsrLinks map[string]string
	// DiskBytes caps /workspace, TmpBytes /tmp.
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
// capabilities dropped, a new session, die-with-parent, a cleared
// environment, a read-only view of /usr and the few /etc files programs need,
// fresh /proc and /dev, tmpfs /workspace and /tmp, the sandbox user, the
// seccomp filter, and the init as the command. It is a pure function.
func Argv(spec BwrapSpec) []string {
	a := []string{
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--cap-drop", "ALL",
		"--new-session", "--die-with-parent",
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
	for _, name := range spec.EtcHost {
		a = append(a, "--ro-bind-try", "/etc/"+name, "/etc/"+name)
	}
	for _, name := range spec.EtcGenerated {
		a = append(a, "--ro-bind", spec.EtcDir+"/"+name, "/etc/"+name)
	}
	a = append(a,
		"--symlink", "/proc/self/mounts", "/etc/mtab",
		"--proc", "/proc",
		"--dev", "/dev",
		"--size", strconv.FormatInt(spec.TmpBytes, 10), "--tmpfs", "/tmp",
		"--size", strconv.FormatInt(spec.DiskBytes, 10), "--tmpfs", Workspace,
		"--bind", spec.ControlDir, ControlDir,
		"--ro-bind", spec.InitBinary, InitPath,
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
	a = append(a, "--", InitPath)
	return append(a, spec.InitArgs...)
}

// etcHostFiles are the host /etc entries a sandbox sees (read-only, when
// present): the dynamic loader's cache, alternatives, certificates, time
// zone, MIME types and a few library configuration files. Everything else of
// /etc (shadow, ssh, the worker's configuration, gitconfig…) stays out.
var etcHostFiles = []string{
	"alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"ssl/certs", "ssl/openssl.cnf", "ca-certificates.conf",
	"localtime", "timezone", "mime.types", "protocols", "services",
	"gai.conf", "host.conf", "inputrc", "magic", "magic.mime",
	"os-release", "debian_version", "fonts", "perl", "python3", "python3.11",
	"bash.bashrc", "profile", "environment", "login.defs", "terminfo",
}

// etcGenerated are the /etc files written for the sandbox (see etcFiles).
var etcGenerated = []string{"passwd", "group", "hosts", "nsswitch.conf", "resolv.conf"}

// etcFiles returns the generated /etc contents: the sandbox user and group,
// a localhost-only hosts file, files-then-dns lookups, and a resolver at the
// sandbox's own loopback (reached only when egress is on; without egress the
// sandbox has no network at all).
func etcFiles(hostname string) map[string]string {
	uid, gid := strconv.Itoa(SandboxUID), strconv.Itoa(SandboxGID)
	return map[string]string{
		"passwd": "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n" +
			"sandbox:x:" + uid + ":" + gid + ":sandbox:" + Workspace + ":/bin/sh\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group": "root:x:0:\nsandbox:x:" + gid + ":\nnogroup:x:65534:\n",
		"hosts": "127.0.0.1\tlocalhost " + hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\n" +
			"hosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n",
		"resolv.conf": "nameserver 127.0.0.1\noptions ndots:0\n",
	}
}

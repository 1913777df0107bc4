// Package control is what the sandbox runtime (on the host, package
// sandbox) and the init (inside the sandbox, package inside) share: the
// layout of a sandbox (its paths, its user, the descriptors the init
// inherits, the init's spec) and the control protocol between them. It
// imports only the standard library, so the init links nothing of the host
// side.
package control

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
)

// Paths and user inside every sandbox.
const (
	// Workspace is the sandbox's working directory and home: a directory of
	// the sandbox's one size- and inode-capped tmpfs.
	Workspace = "/workspace"
	// InitPath is where the init binary is bound (read-only).
	InitPath = "/.init"
	// SandboxUID and SandboxGID are the user and group of the sandbox's
	// processes as seen inside (mapped to the slot's host uid).
	SandboxUID = 1000
	SandboxGID = 1000
)

// The init's first argument says what it is to do.
const (
	// InitMarker makes it the init of a sandbox: `/.init __sandbox-init`.
	InitMarker = "__sandbox-init"
	// ExecMarker makes it cap the limits of a one-command sandbox and
	// become its command: `/.init __sandbox-exec MAX_FILES -- COMMAND...`.
	ExecMarker = "__sandbox-exec"
	// ServeMarker makes it a tiny web server on the sandbox's own loopback
	// that answers every request with one HTML page holding TEXT (the
	// self-test's browser check loads it): `/.init __sandbox-serve ADDR TEXT`.
	ServeMarker = "__sandbox-serve"
	// FetchMarker makes it an HTTPS client for the self-test's broker
	// check: one GET of URL through the sandbox's proxy variables, trusting
	// the system bundle (SSL_CERT_FILE), with "Authorization: Bearer "
	// and the value of the variable VAR; it prints the answer's status:
	// `/.init __sandbox-fetch URL VAR`.
	FetchMarker = "__sandbox-fetch"
	// IsolateMarker makes it the step between the init and each command it
	// starts: it puts itself in a Landlock domain of its own (when
	// ISOLATION is "landlock"; "none" skips it), becomes a child subreaper,
	// and replaces itself with the command:
	// `/.init __sandbox-isolate ISOLATION PROGRAM -- ARGV...`.
	IsolateMarker = "__sandbox-isolate"
)

// Descriptors the init inherits through bubblewrap (the runtime's
// ExtraFiles; bubblewrap's own are 3, 4 and 6).
const (
	// FDGo is a pipe the init (or the capped-exec shim, or, for a
	// one-command sandbox that prlimit starts, bubblewrap itself) reads one
	// byte from before it runs anything of the sandbox's: the runtime writes
	// it once it has moved the sandbox into its cgroup. The init starts
	// meanwhile, so its start and bubblewrap's setup overlap the move.
	FDGo = 5
	// FDReady is a pipe the init writes one byte to, and closes, once it
	// accepts commands.
	FDReady = 7
	// FDSpec is a pipe the init reads its InitSpec from (JSON).
	FDSpec = 8
	// FDControl is the listening control socket the runtime made.
	FDControl = 9
	// FDEgress is an O_PATH descriptor of the sandbox's egress socket (only
	// with egress); the init connects through /proc/self/fd/FDEgress.
	FDEgress = 10
)

// InitSpec is what the init is told through FDSpec: never on a command
// line, where every user of the host could read it.
type InitSpec struct {
	// Env is added to the environment of every command (the create's env).
	Env map[string]string `json:"env,omitempty"`
	// Egress makes the init run the bridge before its first command.
	Egress bool `json:"egress,omitempty"`
	// MaxOpenFiles is the descriptor limit the init sets for itself and so
	// for every process of the sandbox.
	MaxOpenFiles int `json:"max_open_files"`
	// Cwd is where a command without a working directory of its own runs
	// (an image's working directory), when it exists; "": the workspace.
	Cwd string `json:"cwd,omitempty"`
}

// ErrPath is returned for a path that leaves the workspace.
var ErrPath = errors.New("sandbox: path leaves the workspace")

// WorkspaceRel turns p (relative to the workspace, or absolute within it)
// into a clean relative path that stays in the workspace ("." for the
// workspace itself). Errors: ErrPath.
func WorkspaceRel(p string) (string, error) {
	if p == Workspace {
		return ".", nil
	}
	if strings.HasPrefix(p, "/") {
		rest, ok := strings.CutPrefix(p, Workspace+"/")
		if !ok {
			return "", ErrPath
		}
		p = rest
	}
	if p == "" || !filepath.IsLocal(p) {
		return "", ErrPath
	}
	return filepath.Clean(p), nil
}

// ExitCode maps a wait status to a shell-style exit code (128+signal).
func ExitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

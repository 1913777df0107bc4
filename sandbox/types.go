// Package sandbox runs untrusted code in bubblewrap sandboxes: every
// namespace unshared, all capabilities dropped, a seccomp filter, a cgroup
// with memory/pids/cpu limits, an unprivileged host uid per slot, a
// size-capped tmpfs workspace, a time box, and a verified wipe.
//
// Options map to the bubblewrap argv by a pure function (Argv); the Runtime
// owns N slots and creates, executes in, copies files to and from, and wipes
// sandboxes. Inside each sandbox runs a small init (this program's own
// binary, re-executed, or a lean one: see Config.InitBinary and package
// inside) as the sandbox's pid 1, which executes the commands it is sent
// over a unix socket. Runtime.Run runs one command in a fresh sandbox
// without an init (codes-sandbox run).
package sandbox

import (
	"context"
	"errors"
	"os"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox/control"
)

// Options describe one sandbox. Zero fields take the defaults above.
type Options struct {
	// TimeBox is how long the sandbox lives (default 5 min, at most 30).
	TimeBox time.Duration
	Limits  agentsandbox.Limits
	// Env is added to the allow-listed environment of every command.
	Env map[string]string
	// Egress gives the sandbox a way out through the worker's proxy (a unix
	// socket of its own, bridged by the init). Without it the sandbox has no
	// way out at all.
	Egress bool
	// EgressPolicy is what the sandbox may reach through the proxy (with
	// Egress; the zero value: public mode), passed to the attacher.
	EgressPolicy agentsandbox.EgressPolicy
	// SelfTest runs the sandbox in the runtime's slot kept for the
	// self-test, so that a busy worker can still prove its facts; no other
	// sandbox ever uses that slot. Only the self-test's view of the runtime
	// (Runtime.SelfTest) makes, finds and lists such sandboxes; its Create
	// sets SelfTest.
	SelfTest bool
	// Browser gives the sandbox a headless browser (Runtime.Browser): the
	// runtime must have Config.Browser, and the limits must hold it
	// (agentsandbox.Limits.CheckBrowser).
	Browser bool
	// Secrets are credentials the sandbox may use but never read (with
	// Egress): its commands' environment gets a placeholder per name, and
	// the egress proxy puts the value in place of it only in requests to
	// the secret's hosts, through a CA of the sandbox's own that its trust
	// bundle holds.
	Secrets map[string]agentsandbox.Secret
	// EgressCanary is the self-test's TLS canary for its probe secret's
	// host (see agentsandbox.EgressCanary), passed to the attacher: only a
	// SelfTest sandbox with Secrets may have one.
	EgressCanary *agentsandbox.EgressCanary
	// Image, when set, is the sandbox's root instead of the host's view
	// (see RootImage); Create calls its Release exactly once, whatever
	// happens. A browser sandbox cannot have one.
	Image *RootImage
}

// Info describes a running sandbox.
type Info struct {
	ID        string              `json:"id"`
	Slot      int                 `json:"slot"`
	CreatedAt time.Time           `json:"created_at"`
	ExpiresAt time.Time           `json:"expires_at"`
	Limits    agentsandbox.Limits `json:"limits"`
	// HostUID is the unprivileged host uid (and gid) the sandbox's processes
	// run as; never 0.
	HostUID int `json:"host_uid"`
	// Egress says whether the sandbox has a way out through the proxy.
	Egress bool `json:"egress"`
	// EgressPolicy is the policy it was attached with (with Egress).
	EgressPolicy agentsandbox.EgressPolicy `json:"egress_policy"`
	// Secrets are the names of its secrets and their hosts (never the
	// values).
	Secrets map[string][]string `json:"secrets,omitempty"`
	// Browser says whether the sandbox has a headless browser.
	Browser bool `json:"browser"`
	// Image and ImageDigest name the image the sandbox runs on (empty: the
	// host's view).
	Image       string `json:"image,omitempty"`
	ImageDigest string `json:"image_digest,omitempty"`
	// Broken says the sandbox's init stopped answering: every call but
	// Delete fails with ErrBroken.
	Broken bool `json:"broken,omitempty"`
}

// WipeReport says what the wipe removed and whether it verified that nothing
// of the sandbox is left.
type WipeReport struct {
	Verified bool `json:"verified"`
	// Leftovers lists what is still there (processes, mounts, cgroups,
	// files); empty when Verified.
	Leftovers []string      `json:"leftovers,omitempty"`
	Duration  time.Duration `json:"-"`
}

// Errors of the Runtime.
var (
	// ErrCapacity is returned by Create when every slot is in use.
	ErrCapacity = errors.New("sandbox: all slots are in use")
	// ErrLimits is returned by Create while the runtime cannot enforce its
	// sandboxes' limits (see Runtime.LimitProblems).
	ErrLimits = errors.New("sandbox: limits cannot be enforced")
	// ErrHost is returned by Create while the host cannot run sandboxes
	// (see Config.HostProblems); the error names each problem and its fix.
	ErrHost = errors.New("sandbox: this host cannot run sandboxes")
	// ErrNotFound is returned for an unknown or already wiped sandbox.
	ErrNotFound = errors.New("sandbox: no such sandbox")
	// ErrBroken is returned by every call to a sandbox's init once the init
	// stopped answering within Config.ControlTimeout (see Info.Broken):
	// delete the sandbox.
	ErrBroken = errors.New("sandbox: its init does not answer; delete it")
	// ErrPath is returned for a file path that leaves the workspace.
	ErrPath = control.ErrPath
	// ErrNoSpace is returned for a write past the workspace's size or inode
	// cap.
	ErrNoSpace = errors.New("sandbox: the workspace is full")
	// ErrIsDir is returned for a file operation on a directory.
	ErrIsDir = errors.New("sandbox: is a directory")
	// ErrNotDir is returned when a part of a path is not a directory.
	ErrNotDir = errors.New("sandbox: not a directory")
	// ErrNoProcess is returned for a pid that is not one of the sandbox's
	// commands.
	ErrNoProcess = errors.New("sandbox: no such process")
	// ErrExited is returned by Signal and Stdin for a command that has
	// exited (its record stays: Process).
	ErrExited = errors.New("sandbox: the process has exited")
	// ErrNoCommand is returned by Run for a command the sandbox does not
	// have (the shell's "command not found").
	ErrNoCommand = errors.New("command not found")
	// ErrInvalid is returned for a request the init refuses as invalid (its
	// message says why).
	ErrInvalid = errors.New("sandbox: invalid request")
)

// EgressAttacher gives each sandbox its own socket into the worker's egress
// proxy. Attach starts serving the proxy for sandbox id on a new unix socket
// that only uid may connect to, bound at tempPath (in a directory only root
// can write) just long enough to make it, and returns an O_PATH descriptor
// of it (sock, which the caller closes once it has passed it to the
// sandbox) and detach, which stops serving. The sandbox connects through
// that descriptor; the socket has no name on disk that it could replace.
// opts carries the sandbox's policy (Options.EgressPolicy); an attacher
// refuses a policy it cannot enforce. The egress package implements it.
type EgressAttacher interface {
	Attach(ctx context.Context, id, tempPath string, uid int, opts AttachOptions) (sock *os.File, detach func(), err error)
}

// SecretsUpdater is an EgressAttacher that can replace the secrets it
// brokers for an attached sandbox (every one: kept, rotated and added),
// effective from the next request (Runtime.UpdateSecrets). The egress
// package implements it.
type SecretsUpdater interface {
	UpdateSecrets(id string, secrets []agentsandbox.EgressSecret) error
}

// AttachOptions are what the runtime tells the EgressAttacher about a
// sandbox.
type AttachOptions = agentsandbox.EgressAttachOptions

// EgressBridge runs inside the sandbox, in the init, before the first
// command: it bridges an in-sandbox loopback proxy address to the worker's
// proxy socket at socketPath (a /proc/self/fd path of the init's) and, when
// transparent, serves the in-sandbox resolver and the 80/443 listeners. It
// returns only once every listener accepts connections, with the
// environment variables (HTTP_PROXY and the like) to add to every command.
// The egress package implements it.
type EgressBridge func(ctx context.Context, socketPath string, transparent bool) (env map[string]string, err error)

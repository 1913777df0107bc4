package agentsandbox

import "time"

// ExecRequest is one command to run in an existing sandbox.
type ExecRequest struct {
	// Argv is the command and its arguments; Argv[0] is looked up in PATH
	// when it has no slash.
	Argv []string `json:"argv"`
	// Env is added to the sandbox's environment for this command.
	Env map[string]string `json:"env,omitempty"`
	// Cwd is relative to /workspace (or absolute within it); default
	// /workspace.
	Cwd string `json:"cwd,omitempty"`
	// Stdin is the command's whole standard input.
	Stdin []byte `json:"stdin,omitempty"`
	// Timeout ends the command and everything it started (not the sandbox);
	// 0 means the time box.
	Timeout time.Duration `json:"-"`
	// TTY runs the command on a pseudo-terminal of the sandbox's own (its
	// stdin, stdout and stderr, and its controlling terminal), of Rows×Cols
	// (default 24×80); its output is one stream.
	TTY        bool   `json:"tty,omitempty"`
	Rows, Cols uint16 `json:"-"`
}

// Reasons of an ExecResult: which limit ended a command.
const (
	ReasonTimeout = "timeout"  // the request's timeout
	ReasonTimeBox = "time_box" // the sandbox's time box ended
	ReasonMemory  = "memory"   // the memory limit
	ReasonPids    = "pids"     // the pids limit
	ReasonDeleted = "deleted"  // the sandbox was deleted, or the caller went away
	ReasonExited  = "exited"   // the sandbox ended by itself
)

// ExecResult is how a command ended.
type ExecResult struct {
	// ExitCode is the command's exit status, 128+N when signal N ended it.
	ExitCode int `json:"exit_code"`
	// Reason is one of the Reason constants when a limit ended the command;
	// empty for a normal exit.
	Reason string `json:"reason,omitempty"`
}

// ValidEnvName reports whether name is a variable name a sandbox takes:
// letters, digits and _, not starting with a digit.
func ValidEnvName(name string) bool {
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '_' && (c < '0' || c > '9') && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

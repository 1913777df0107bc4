package workerapi

import "time"

// ExecRequest is the body of POST /v1/sandboxes/{id}/exec.
type ExecRequest struct {
	// Argv is the command and its arguments (required).
	Argv []string `json:"argv"`
	// Env is added to the sandbox's environment for this command.
	Env map[string]string `json:"env,omitempty"`
	// Cwd is the working directory, relative to /workspace (or an absolute
	// path under /workspace); default /workspace.
	Cwd string `json:"cwd,omitempty"`
	// Stdin is the command's standard input as text; StdinBase64 is the
	// same for bytes. At most one of them.
	Stdin       *string `json:"stdin,omitempty"`
	StdinBase64 *string `json:"stdin_base64,omitempty"`
	// TimeoutSeconds ends the command (not the sandbox); 0 means the time box.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	// Background starts the command and answers 201 with its process at
	// once; it runs on (see the processes routes) until it exits, is
	// signalled or the sandbox ends. Stdin and TimeoutSeconds are refused
	// with it: write to its stdin route, signal it.
	Background bool `json:"background,omitempty"`
	// TTY runs the command on a terminal of the sandbox's own, Rows×Cols
	// (default 24×80); its output is one stream, stdout.
	TTY  bool `json:"tty,omitempty"`
	Rows int  `json:"rows,omitempty"`
	Cols int  `json:"cols,omitempty"`
}

// ExecEvent is one line of the NDJSON answer of an exec. Output events have
// Stream; the last event has ExitCode, or Error when the command could not
// be run to its end.
type ExecEvent struct {
	// Stream is "stdout" or "stderr" on output events.
	Stream string `json:"stream,omitempty"`
	// Data is the output when it is text (UTF-8); DataBase64, set instead,
	// holds output that is not.
	Data       string `json:"data,omitempty"`
	DataBase64 string `json:"data_base64,omitempty"`
	// DroppedBytes, on an output event without data, is how much output of
	// Stream was dropped at this point because the client read too slowly;
	// on the last event, the total dropped.
	DroppedBytes int64 `json:"dropped_bytes,omitempty"`
	// ExitCode is set on the last event of a command that ran.
	ExitCode *int `json:"exit_code,omitempty"`
	// Reason says which limit ended the command: timeout, time_box, memory,
	// pids or deleted; empty for a normal exit.
	Reason string `json:"reason,omitempty"`
	// Error is set on the last event when the command could not be run.
	Error *Error `json:"error,omitempty"`
	// Process, on the last event of a process's output, is its record.
	Process *Process `json:"process,omitempty"`
}

// Process is a command of a sandbox as the API shows it: an item of GET
// …/processes, the answer of a background exec and of GET …/processes/{pid}.
type Process struct {
	Pid       int       `json:"pid"`
	Argv      []string  `json:"argv"`
	StartedAt time.Time `json:"started_at"`
	// TTY says it runs on a terminal; Background that it was started in
	// the background (a foreground one ends with its request).
	TTY        bool `json:"tty"`
	Background bool `json:"background"`
	// State is "running" or "exited".
	State string `json:"state"`
	// ExitCode and Reason are set once it exited (Reason as an exec's).
	ExitCode *int   `json:"exit_code,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// ProcessList is the answer to GET …/processes.
type ProcessList struct {
	Items []Process `json:"items"`
}

// SignalRequest is the body of POST …/processes/{pid}/signal.
type SignalRequest struct {
	// Signal is a name without SIG: TERM, KILL, INT, HUP, QUIT, USR1,
	// USR2, STOP, CONT or WINCH.
	Signal string `json:"signal"`
}

// StdinRequest is a JSON body of POST …/processes/{pid}/stdin (the body
// may instead be the bytes themselves, as application/octet-stream, with
// ?close=1 for Close).
type StdinRequest struct {
	// Data is text to write; DataBase64 the same for bytes. At most one.
	Data       *string `json:"data,omitempty"`
	DataBase64 *string `json:"data_base64,omitempty"`
	// Close closes the process's stdin after the data (on a terminal:
	// types the end-of-file character).
	Close bool `json:"close,omitempty"`
}

// The attach protocol, over one WebSocket (GET …/processes/{pid}/attach):
//
//	client → worker  binary: bytes for the process's stdin (its terminal)
//	                 text:   {"type":"resize","rows":R,"cols":C} | {"type":"eof"}
//	worker → client  binary: one byte, AttachStdout or AttachStderr, then output
//	                 text:   {"type":"dropped","stream":S,"bytes":N}
//	                         {"type":"exit","process":{…}} (last)
//	                         {"type":"error","error":{"code","message"}} (last)
const (
	AttachStdout byte = 1
	AttachStderr byte = 2
)

// AttachMessage is a text message of the attach protocol.
type AttachMessage struct {
	// Type is resize, eof, dropped, exit or error.
	Type    string   `json:"type"`
	Rows    int      `json:"rows,omitempty"`
	Cols    int      `json:"cols,omitempty"`
	Stream  string   `json:"stream,omitempty"`
	Bytes   int64    `json:"bytes,omitempty"`
	Process *Process `json:"process,omitempty"`
	Error   *Error   `json:"error,omitempty"`
}

package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox/control"
)

// The processes of a sandbox: every command its init started, foreground
// execs included, with their state and output (see package inside).

// Process is one command of a sandbox, as its init tells it.
type Process = control.Process

// Output is one piece of a process's output: Data of Stream ("stdout" or
// "stderr"), or Dropped bytes a slow reader missed at this point.
type Output struct {
	Stream  string
	Data    []byte
	Dropped int64
}

// streamName names a frame kind of output.
func streamName(kind byte) string {
	if kind == control.FrameStderr {
		return "stderr"
	}
	return "stdout"
}

// Start runs req in the background in sandbox id and returns its record at
// once; it keeps running (its output kept in a bounded buffer) until it
// exits, is signalled, or the sandbox ends. req.Stdin and req.Timeout are
// ignored: write to its stdin with Stdin. Errors: ErrNotFound; an invalid
// request (ErrInvalid, fs.ErrNotExist or ErrNotDir for the cwd, ErrPath);
// the command could not start (its message says why).
func (r *Runtime) Start(ctx context.Context, id string, req agentsandbox.ExecRequest) (Process, error) {
	var p Process
	if b, err := r.get(id); err == nil {
		req.Env = b.withAddedEnv(req.Env)
	}
	if err := r.call(ctx, id, execRequest(control.OpStart, req), &p); err != nil {
		return Process{}, fmt.Errorf("start: %w", err)
	}
	return p, nil
}

// Processes returns the sandbox's commands, oldest first. Errors:
// ErrNotFound; the sandbox's init did not answer.
func (r *Runtime) Processes(ctx context.Context, id string) ([]Process, error) {
	var ps []Process
	if err := r.call(ctx, id, control.Request{Op: control.OpProcesses}, &ps); err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	return ps, nil
}

// Process returns one command's record. Errors: ErrNotFound, ErrNoProcess.
func (r *Runtime) Process(ctx context.Context, id string, pid int) (Process, error) {
	var p Process
	if err := r.call(ctx, id, control.Request{Op: control.OpProcess, Pid: pid}, &p); err != nil {
		return Process{}, fmt.Errorf("process %d: %w", pid, err)
	}
	return p, nil
}

// Output passes to fn what the command's buffer holds and, when follow,
// everything it writes until it ends, then returns its record. fn's error
// stops it (and is returned). Errors: ErrNotFound, ErrNoProcess, ctx ended.
func (r *Runtime) Output(ctx context.Context, id string, pid int, follow bool, fn func(Output) error) (Process, error) {
	var p Process
	err := r.stream(ctx, id, control.Request{Op: control.OpOutput, Pid: pid, Follow: follow}, nil, fn, &p)
	if err != nil {
		return Process{}, fmt.Errorf("output of %d: %w", pid, err)
	}
	return p, nil
}

// Signal sends sig (TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP, CONT,
// WINCH) to the command's process group. Errors: ErrNotFound, ErrNoProcess,
// ErrExited (the command has exited), ErrInvalid (an unknown signal).
func (r *Runtime) Signal(ctx context.Context, id string, pid int, sig string) error {
	if err := r.call(ctx, id, control.Request{Op: control.OpSignal, Pid: pid, Signal: sig}, nil); err != nil {
		return fmt.Errorf("signal %d: %w", pid, err)
	}
	return nil
}

// Stdin writes src to the command's stdin (its terminal's input), then,
// when closeAfter, closes it (on a terminal: types the EOF character).
// Errors: ErrNotFound, ErrNoProcess, ErrExited (the command has exited
// before: nothing of src was written), reading src, ctx ended.
func (r *Runtime) Stdin(ctx context.Context, id string, pid int, src io.Reader, closeAfter bool) error {
	b, err := r.get(id)
	if err != nil {
		return err
	}
	c, fw, end, err := r.request(ctx, b, control.Request{Op: control.OpStdin, Pid: pid, Close: closeAfter})
	if err != nil {
		return fmt.Errorf("stdin of %d: %w", pid, err)
	}
	defer end()
	sendErr := control.CopyFrames(fw, src)
	done, err := readReply(c, nil)
	if err = errors.Join(sendErr, err, codeError(done)); err != nil {
		return fmt.Errorf("stdin of %d: %w", pid, err)
	}
	return nil
}

// Attachment joins a caller to a running command (Attach): Input and
// Resize reach it, Next reads its output. It is one connection to the
// sandbox's init; Close ends it (the command runs on).
type Attachment struct {
	conn net.Conn
	fw   *control.Writer
	fr   *control.Reader
	end  func()
}

// Attach joins the caller to command pid (foreground or background): see
// Attachment. Errors: ErrNotFound; the init did not answer.
func (r *Runtime) Attach(ctx context.Context, id string, pid int) (*Attachment, error) {
	b, err := r.get(id)
	if err != nil {
		return nil, err
	}
	c, fw, end, err := r.request(ctx, b, control.Request{Op: control.OpAttach, Pid: pid})
	if err != nil {
		return nil, fmt.Errorf("attach %d: %w", pid, err)
	}
	return &Attachment{conn: c, fw: fw, fr: control.NewReader(c), end: end}, nil
}

// Input types p into the command (its stdin).
func (a *Attachment) Input(p []byte) error { return a.fw.Frame(control.FrameData, p) }

// Resize sets the size of the command's terminal (ignored without one).
func (a *Attachment) Resize(rows, cols uint16) error {
	return a.fw.JSON(control.FrameResize, control.Resize{Rows: rows, Cols: cols})
}

// Next returns the next piece of output; at the command's end it returns
// its record with io.EOF. Errors: ErrNoProcess (no such command), the
// connection broke.
func (a *Attachment) Next() (Output, Process, error) {
	for {
		kind, p, err := a.fr.Next()
		if err != nil {
			return Output{}, Process{}, fmt.Errorf("attachment: %w", err)
		}
		switch kind {
		case control.FrameStdout, control.FrameStderr:
			return Output{Stream: streamName(kind), Data: append([]byte(nil), p...)}, Process{}, nil
		case control.FrameDropped:
			n, _ := strconv.ParseInt(string(p), 10, 64)
			return Output{Dropped: n}, Process{}, nil
		case control.FrameDone:
			var done control.Done
			var rec Process
			if err := json.Unmarshal(p, &done); err != nil {
				return Output{}, Process{}, fmt.Errorf("attachment: %w", err)
			}
			if err := codeError(done); err != nil {
				return Output{}, Process{}, err
			}
			if err := json.Unmarshal(done.Data, &rec); err != nil {
				return Output{}, Process{}, fmt.Errorf("attachment: %w", err)
			}
			return Output{}, rec, io.EOF
		}
	}
}

// Close ends the attachment.
func (a *Attachment) Close() error {
	a.end()
	return nil
}

// call runs one operation without data either way and decodes its result
// into out (when not nil).
func (r *Runtime) call(ctx context.Context, id string, req control.Request, out any) error {
	return r.stream(ctx, id, req, nil, nil, out)
}

// stream runs one operation: src (when not nil) as data frames and an end
// frame, output frames to fn (when not nil), the result into out (when not
// nil).
func (r *Runtime) stream(ctx context.Context, id string, req control.Request, src io.Reader, fn func(Output) error, out any) error {
	b, err := r.get(id)
	if err != nil {
		return err
	}
	c, fw, end, err := r.request(ctx, b, req)
	if err != nil {
		return err
	}
	defer end()
	if src != nil { // an operation without data reads none: send no end frame either
		if err := control.CopyFrames(fw, src); err != nil {
			return err
		}
	}
	fr := control.NewReader(c)
	for {
		kind, p, err := fr.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("read reply: %w", err)
		}
		switch kind {
		case control.FrameStdout, control.FrameStderr:
			if fn != nil {
				if err := fn(Output{Stream: streamName(kind), Data: p}); err != nil {
					return err
				}
			}
		case control.FrameDropped:
			if fn != nil {
				n, _ := strconv.ParseInt(string(p), 10, 64)
				if err := fn(Output{Dropped: n}); err != nil {
					return err
				}
			}
		case control.FrameDone:
			var done control.Done
			if err := json.Unmarshal(p, &done); err != nil {
				return fmt.Errorf("read reply: %w", err)
			}
			if err := codeError(done); err != nil {
				return err
			}
			if out != nil && len(done.Data) > 0 {
				if err := json.Unmarshal(done.Data, out); err != nil {
					return fmt.Errorf("read reply: %w", err)
				}
			}
			return nil
		}
	}
}

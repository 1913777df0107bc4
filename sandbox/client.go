package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strconv"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/unixsock"
	"openvibe.network/agentsandbox/sandbox/control"
)

// Exec runs req in sandbox id with req.Stdin as its standard input,
// streaming its output to stdout and stderr as it arrives, and returns how
// it ended. A command ended by a limit has a Reason: "timeout"
// (req.Timeout), "time_box" or "deleted" (the sandbox ended), "memory" or
// "pids". Errors: ErrNotFound; an invalid request (empty argv, a cwd outside
// the workspace); ctx ended; a broken sandbox.
func (r *Runtime) Exec(ctx context.Context, id string, req agentsandbox.ExecRequest, stdout, stderr io.Writer) (agentsandbox.ExecResult, error) {
	return r.ExecStream(ctx, id, req, bytes.NewReader(req.Stdin), stdout, stderr)
}

// ExecStream is Exec with standard input streamed from stdin (req.Stdin is
// ignored); stdin may be nil for none. A stdout or stderr with a
// Started(pid int) method is told the command's pid once it started (before
// any of its output; never for a request refused before it started); one
// with a Dropped(n int64) method is told when the init had to drop output
// (the caller read more slowly than the command wrote, by more than its
// buffer). A stdin whose Read blocks may still be read from, once, after
// ExecStream returned (as os/exec does).
func (r *Runtime) ExecStream(ctx context.Context, id string, req agentsandbox.ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (agentsandbox.ExecResult, error) {
	b, err := r.get(id)
	if err != nil {
		return agentsandbox.ExecResult{}, err
	}
	if len(req.Argv) == 0 {
		return agentsandbox.ExecResult{}, errors.New("exec: empty argv")
	}
	req.Env = b.withAddedEnv(req.Env)
	if req.Cwd != "" {
		if _, err := control.WorkspaceRel(req.Cwd); err != nil {
			return agentsandbox.ExecResult{}, fmt.Errorf("exec: cwd %q: %w", req.Cwd, err)
		}
	}
	before, evErr := b.group.Events()
	c, fw, end, err := r.request(ctx, b, execRequest(control.OpExec, req))
	if errors.Is(err, ErrTooLarge) {
		return agentsandbox.ExecResult{}, fmt.Errorf("exec: %w", err)
	}
	if err != nil {
		return r.lostConnection(ctx, b, err)
	}
	defer end()
	go func() { _ = control.CopyFrames(fw, stdin) }()
	done, err := readReply(c, map[byte]io.Writer{control.FrameStdout: stdout, control.FrameStderr: stderr})
	if errors.Is(err, errOutput) {
		return agentsandbox.ExecResult{}, fmt.Errorf("exec: %w", err)
	}
	if err != nil {
		return r.lostConnection(ctx, b, err)
	}
	if err := codeError(done); err != nil {
		return agentsandbox.ExecResult{}, fmt.Errorf("exec: %w", err)
	}
	res := agentsandbox.ExecResult{ExitCode: done.ExitCode, Reason: done.Reason}
	if res.Reason == "" && res.ExitCode != 0 && evErr == nil {
		if after, err := b.group.Events(); err == nil {
			switch {
			case after.OOMKills > before.OOMKills:
				res.Reason = "memory"
			case after.PidsMax > before.PidsMax:
				res.Reason = "pids"
			}
		}
	}
	return res, nil
}

// lostConnection explains a control connection that broke: the caller's ctx ended,
// or the sandbox ended (its reason), or an error.
func (r *Runtime) lostConnection(ctx context.Context, b *sandboxState, err error) (agentsandbox.ExecResult, error) {
	if isBroken(err) {
		return agentsandbox.ExecResult{}, fmt.Errorf("exec: %w", err)
	}
	if ctx.Err() != nil {
		return agentsandbox.ExecResult{}, fmt.Errorf("exec: %w", ctx.Err())
	}
	select {
	case <-b.wiped:
	case <-time.After(2 * wipeTimeout):
		return agentsandbox.ExecResult{}, fmt.Errorf("exec: %w", err)
	}
	why := b.endReason()
	if why == "" {
		why = "exited"
		if ev, err := b.group.Events(); err == nil && ev.OOMKills > 0 {
			why = "memory"
		}
	}
	return agentsandbox.ExecResult{ExitCode: 137, Reason: why}, nil
}

// request connects to b's init and sends req. The connection is closed when
// ctx ends, or by end, which the caller must call once done with it. It is
// under the watchdog (see watchConn): when the init stops answering, reads and
// writes on it fail with ErrBroken.
func (r *Runtime) request(ctx context.Context, b *sandboxState, req control.Request) (_ net.Conn, fw *control.Writer, end func(), err error) {
	raw, err := r.dial(ctx, b)
	if err != nil {
		return nil, nil, nil, err
	}
	c := r.watchConn(b, raw)
	stop := context.AfterFunc(ctx, func() { c.Close() })
	end = func() { stop(); c.Close() }
	fw = control.NewWriter(c)
	if err := fw.JSON(control.FrameRequest, req); err != nil {
		end()
		if errors.Is(err, control.ErrFrameTooLarge) {
			return nil, nil, nil, fmt.Errorf("the request (argv and env) is too large: %w", ErrTooLarge)
		}
		return nil, nil, nil, err
	}
	return c, fw, end, nil
}

// dial connects to b's control socket (see dialInit). A connection the
// init does not take within the control timeout is tried again as long as
// the init answers a ping (a busy init); when it does not, b is marked
// broken. Errors: ErrBroken (b is broken); ctx ended; the connection
// failed.
func (r *Runtime) dial(ctx context.Context, b *sandboxState) (net.Conn, error) {
	for {
		if err := b.brokenErr(); err != nil {
			return nil, err
		}
		dctx, cancel := context.WithTimeout(ctx, r.cfg.ControlTimeout)
		c, err := r.dialInit(dctx, b)
		timedOut := err != nil && ctx.Err() == nil && dctx.Err() != nil
		cancel()
		if !timedOut {
			return c, err
		}
		if r.stalled(b) {
			r.markBroken(b, fmt.Sprintf("its init did not take a connection within %v", r.cfg.ControlTimeout))
		}
	}
}

// dialInit connects to b's control socket through the descriptor the
// runtime kept of it: the socket has no name on disk, so nothing the
// sandbox does can put another socket in its place.
func (r *Runtime) dialInit(ctx context.Context, b *sandboxState) (net.Conn, error) {
	if b.control == nil {
		return nil, fmt.Errorf("connect to sandbox %s: it has no control socket", b.id)
	}
	c, err := unixsock.Dial(ctx, b.control)
	if err != nil {
		return nil, fmt.Errorf("connect to sandbox %s: %w", b.id, err)
	}
	return c, nil
}

// errOutput wraps a failure to write a command's output or a file's content
// to the caller's writer.
var errOutput = errors.New("write output")

// readReply reads the init's frames, writing data frames to their writers,
// until the done frame. A dropped frame is told to a writer of out that has
// a Dropped(n int64) method, a started frame to one with a Started(pid int)
// method.
func readReply(c net.Conn, out map[byte]io.Writer) (control.Done, error) {
	return readReplyFrom(c, out)
}

// readReplyFrom is readReply from r (a connection, or the rest of a reply
// whose first frame control.RecvFD read).
func readReplyFrom(r io.Reader, out map[byte]io.Writer) (control.Done, error) {
	fr := control.NewReader(r)
	for {
		kind, p, err := fr.Next()
		if err != nil {
			return control.Done{}, fmt.Errorf("read reply: %w", err)
		}
		switch kind {
		case control.FrameDone:
			var d control.Done
			if err := json.Unmarshal(p, &d); err != nil {
				return control.Done{}, fmt.Errorf("read reply: %w", err)
			}
			return d, nil
		case control.FrameDropped:
			n, _ := strconv.ParseInt(string(p), 10, 64)
			for _, w := range out {
				if d, ok := w.(interface{ Dropped(int64) }); ok {
					d.Dropped(n)
					break
				}
			}
			continue
		case control.FrameStarted:
			pid, _ := strconv.Atoi(string(p))
			for _, w := range out {
				if s, ok := w.(interface{ Started(int) }); ok {
					s.Started(pid)
					break
				}
			}
			continue
		}
		if w := out[kind]; w != nil {
			if _, err := w.Write(p); err != nil {
				return control.Done{}, fmt.Errorf("%w: %w", errOutput, err)
			}
		}
	}
}

// execRequest is the control request of op for req.
func execRequest(op string, req agentsandbox.ExecRequest) control.Request {
	return control.Request{
		Op: op, Argv: req.Argv, Env: req.Env, Cwd: req.Cwd, Timeout: int64(req.Timeout),
		TTY: req.TTY, Size: control.Resize{Rows: req.Rows, Cols: req.Cols},
	}
}

// codeError is the error of a done frame's code: the sentinels for the codes
// that mean something to a caller (wrapped with the init's message), else
// the message.
func codeError(done control.Done) error {
	sentinel := map[string]error{
		control.CodePath: ErrPath, control.CodeNotExist: fs.ErrNotExist, control.CodeNoSpace: ErrNoSpace,
		control.CodeIsDir: ErrIsDir, control.CodeNotDir: ErrNotDir, control.CodeNoProcess: ErrNoProcess, control.CodeExited: ErrExited,
		control.CodeInvalid: ErrInvalid, control.CodeExists: ErrExists, control.CodeNotEmpty: ErrNotEmpty,
		control.CodeTooLarge: ErrTooLarge,
	}[done.Code]
	switch {
	case done.Code == "":
		return nil
	case sentinel != nil:
		return fmt.Errorf("%s: %w", done.Error, sentinel)
	}
	return errors.New(done.Error)
}

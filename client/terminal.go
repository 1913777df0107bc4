package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"openvibe.network/agentsandbox/workerapi"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"openvibe.network/agentsandbox/internal/wsmsg"
)

// TerminalOptions are the command of a Terminal and its terminal's size.
type TerminalOptions struct {
	// Argv is the command and its arguments (required), e.g. ["bash"].
	Argv []string
	// Env is added to the sandbox's environment for this command.
	Env map[string]string
	// Cwd is the working directory relative to /workspace (default: it).
	Cwd string
	// Rows and Cols are the terminal's size; 0 means 24×80.
	Rows, Cols int
}

// Terminal is an interactive session with a command on a terminal of its
// sandbox, over the worker's attach WebSocket: Read returns its output,
// Write types into it. Read and Wait must not be called concurrently;
// Write, Resize, CloseInput, Dropped and Close may be called alongside
// them.
type Terminal struct {
	p    *Process
	ws   *wsmsg.Conn
	stop func() bool // stops the close at ctx's end

	// The read side (Read, Wait).
	pending []byte
	rec     *ProcessInfo // the exit record, once read
	err     error        // why reading ended

	dropped atomic.Int64
}

// maxInput bounds one input message of a terminal (the worker takes 1 MiB).
const maxInput = 32 << 10

// Terminal starts opts' command in the background on a terminal of the
// sandbox's own and attaches to it (see (*Process).Attach). ctx bounds the
// session: once it ends, the connection closes. It fails as Start and
// Attach do; a command whose attach failed is killed.
func (sb *Sandbox) Terminal(ctx context.Context, opts TerminalOptions) (*Terminal, error) {
	info, err := sb.start(ctx, workerapi.ExecRequest{Argv: opts.Argv, Env: opts.Env, Cwd: opts.Cwd,
		Background: true, TTY: true, Rows: opts.Rows, Cols: opts.Cols})
	if err != nil {
		return nil, fmt.Errorf("terminal: %w", err)
	}
	p := sb.Process(info.Pid)
	t, err := p.Attach(ctx)
	if err != nil {
		p.kill(ctx)
		return nil, fmt.Errorf("terminal: %w", err)
	}
	return t, nil
}

// Attach joins the caller to the process (on a terminal or not) over a
// WebSocket: the output begins with what its buffer holds. ctx bounds the
// session: once it ends, the connection closes; the process runs on
// either way. It fails with ErrProcessNotFound for an unknown pid and
// ErrSandboxNotFound once the sandbox is gone.
func (p *Process) Attach(ctx context.Context) (*Terminal, error) {
	conn, err := p.sb.w.dialWebSocket(ctx, p.path("attach"))
	if err != nil {
		if errors.Is(err, websocket.ErrBadHandshake) {
			// The handshake keeps no answer: the process's state says why.
			if _, ierr := p.Info(ctx); ierr != nil {
				return nil, fmt.Errorf("attach: %w", ierr)
			}
		}
		return nil, fmt.Errorf("attach %d: %w", p.pid, err)
	}
	ws := wsmsg.New(conn)
	t := &Terminal{p: p, ws: ws}
	t.stop = context.AfterFunc(ctx, func() { ws.Close() })
	return t, nil
}

// dialWebSocket opens a WebSocket to path of the worker with the token,
// through the client's transport's dialer and TLS settings.
func (w *Worker) dialWebSocket(ctx context.Context, path string) (*websocket.Conn, error) {
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	if tr, ok := w.http.Transport.(*http.Transport); ok {
		if tr.TLSClientConfig != nil {
			d.TLSClientConfig = tr.TLSClientConfig.Clone()
		}
		d.NetDialContext = tr.DialContext
	}
	conn, resp, err := d.DialContext(ctx, "ws"+strings.TrimPrefix(w.base, "http")+path, w.BrowserHeader())
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	return conn, err
}

// Process returns the handle of the session's command.
func (t *Terminal) Process() *Process { return t.p }

// Read reads the command's output (stdout and stderr alike; a terminal has
// only one). At the command's exit it returns io.EOF (see Wait for the
// exit). It fails when the connection breaks or with an *APIError the
// worker ended the session with.
func (t *Terminal) Read(p []byte) (int, error) {
	for len(t.pending) == 0 {
		if t.err != nil {
			return 0, t.err
		}
		t.next()
	}
	n := copy(p, t.pending)
	t.pending = t.pending[n:]
	return n, nil
}

// next receives one message into the read side.
func (t *Terminal) next() {
	m, err := t.ws.Receive()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = errNoEnd
		}
		t.err = fmt.Errorf("terminal: %w", err)
		return
	}
	if !m.Text {
		if len(m.Data) > 0 && (m.Data[0] == workerapi.AttachStdout || m.Data[0] == workerapi.AttachStderr) {
			t.pending = m.Data[1:]
		}
		return
	}
	var msg workerapi.AttachMessage
	if err := json.Unmarshal(m.Data, &msg); err != nil {
		t.err = fmt.Errorf("terminal: read message: %w", err)
		return
	}
	switch msg.Type {
	case "dropped":
		t.dropped.Add(msg.Bytes)
	case "exit":
		if msg.Process != nil {
			rec := processInfo(*msg.Process)
			t.rec = &rec
		}
		t.err = io.EOF
	case "error":
		e := &APIError{StatusCode: http.StatusSwitchingProtocols}
		if msg.Error != nil {
			e.Code, e.Message = msg.Error.Code, msg.Error.Message
		}
		t.err = fmt.Errorf("terminal: %w", e)
	}
}

// Wait reads, discarding, the output not yet read until the command exits
// and returns its record. Its errors are Read's.
func (t *Terminal) Wait() (ProcessInfo, error) {
	for t.err == nil {
		t.pending = nil
		t.next()
	}
	t.pending = nil
	if t.rec == nil {
		if errors.Is(t.err, io.EOF) {
			return ProcessInfo{}, fmt.Errorf("terminal: %w", errNoEnd)
		}
		return ProcessInfo{}, t.err
	}
	return *t.rec, nil
}

// Dropped returns how many bytes of output the worker dropped so far
// because the session read too slowly (neither the command nor the worker
// waits for a reader).
func (t *Terminal) Dropped() int64 { return t.dropped.Load() }

// Write types p into the command (its terminal's input). It fails when the
// connection is closed.
func (t *Terminal) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		end := min(len(p), n+maxInput)
		if err := t.ws.Send(wsmsg.Message{Data: p[n:end]}, 0); err != nil {
			return n, fmt.Errorf("terminal: write: %w", err)
		}
		n = end
	}
	return n, nil
}

// Resize sets the terminal's size (the command gets SIGWINCH). The worker
// ignores a size outside 1..1000.
func (t *Terminal) Resize(rows, cols int) error {
	return t.send(workerapi.AttachMessage{Type: "resize", Rows: rows, Cols: cols})
}

// CloseInput ends the command's input: on a terminal it types the
// end-of-file character.
func (t *Terminal) CloseInput() error { return t.send(workerapi.AttachMessage{Type: "eof"}) }

// send sends a text message.
func (t *Terminal) send(msg workerapi.AttachMessage) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if err := t.ws.Send(wsmsg.Message{Text: true, Data: b}, 0); err != nil {
		return fmt.Errorf("terminal: %s: %w", msg.Type, err)
	}
	return nil
}

// Close closes the connection; the command runs on (end it with
// Process().Signal, or CloseInput and Wait first).
func (t *Terminal) Close() error {
	t.stop()
	return t.ws.Close()
}

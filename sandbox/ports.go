package sandbox

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"openvibe.network/agentsandbox/sandbox/control"
)

// ErrPortClosed is returned by DialPort when nothing listens on the port
// inside the sandbox.
var ErrPortClosed = errors.New("sandbox: nothing listens on the port")

// portAnswerWait is how long the init may take to connect to a port of
// the sandbox (inside's portDialTimeout) before it answers.
const portAnswerWait = 10 * time.Second

// maxPortReply bounds the init's answer to a port request (a done frame).
const maxPortReply = 64 << 10

// DialPort connects to port (1..65535) on the loopback of sandbox id, from
// inside the sandbox, through its init (control.OpPort): the sandbox gets
// no address anyone could reach, and nothing listens for it on the host.
// The connection carries the TCP connection's bytes as they are; closing
// it ends the TCP connection, and the server's end of writing reads as
// io.EOF. ctx bounds only the connecting. Errors: ErrNotFound; ErrInvalid
// for a port out of range; ErrPortClosed (wrapped with the init's words,
// which name the port) when nothing listens; the sandbox's server did not
// take the connection in time; ctx ended; ErrBroken (the init did not
// answer, see watchdog.go).
func (r *Runtime) DialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("port %d is not in 1..65535: %w", port, ErrInvalid)
	}
	b, err := r.get(id)
	if err != nil {
		return nil, err
	}
	c, err := r.dial(ctx, b)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	// The init answers once the sandbox's server took the connection or
	// its own dial gave up (portAnswerWait); past that and the control
	// timeout, an init that does not answer a ping either is stalled.
	_ = c.SetDeadline(time.Now().Add(portAnswerWait + r.cfg.ControlTimeout))
	err = portHandshake(c, port)
	_ = c.SetDeadline(time.Time{})
	if errors.Is(err, os.ErrDeadlineExceeded) && r.stalled(b) {
		stop()
		c.Close()
		r.markBroken(b, fmt.Sprintf("its init did not answer a port connection within %v", portAnswerWait+r.cfg.ControlTimeout))
		return nil, b.brokenErr()
	}
	if !stop() {
		c.Close()
		return nil, fmt.Errorf("connect to port %d of sandbox %s: %w", port, id, context.Cause(ctx))
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("connect to port %d of sandbox %s: %w", port, id, err)
	}
	return c, nil
}

// portHandshake sends the port request on c and reads the init's answer
// byte by byte exactly (no buffer: whatever the server sends next is the
// caller's to read from c).
func portHandshake(c net.Conn, port int) error {
	if err := control.NewWriter(c).JSON(control.FrameRequest, control.Request{Op: control.OpPort, Port: port}); err != nil {
		return err
	}
	var hdr [5]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return fmt.Errorf("read the init's answer: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxPortReply {
		return fmt.Errorf("read the init's answer: a frame of %d bytes", n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(c, p); err != nil {
		return fmt.Errorf("read the init's answer: %w", err)
	}
	switch hdr[0] {
	case control.FrameStarted:
		return nil
	case control.FrameDone:
		var done control.Done
		if err := json.Unmarshal(p, &done); err != nil {
			return fmt.Errorf("read the init's answer: %w", err)
		}
		if done.Code == control.CodeRefused {
			return fmt.Errorf("%s: %w", done.Error, ErrPortClosed)
		}
		if err := codeError(done); err != nil {
			return err
		}
	}
	return fmt.Errorf("read the init's answer: unexpected frame %q", hdr[0])
}

package inside

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"
	"time"

	"openvibe.network/agentsandbox/sandbox/control"
)

// The sandbox's own ports, reached by the worker through the init (see
// control.OpPort): the init connects from inside the sandbox's network
// namespace, so a server that listens on the sandbox's loopback is reached
// without the sandbox having any address the host or anyone else can
// reach, and the bytes go through the kernel (splice(2)) without passing
// through the init's memory.

// portDialTimeout bounds a connection to the sandbox's own port: loopback
// answers at once unless the server's accept queue is full.
const portDialTimeout = 10 * time.Second

// port serves control.OpPort on c: it connects to req.Port and splices the
// two connections until either ends. It writes its own done frame when it
// could not connect, and none once spliced.
func (s *initServer) port(c net.Conn, req control.Request, fr *control.Reader, fw *control.Writer) {
	uc, ok := c.(*net.UnixConn)
	switch {
	case !ok || fr.Buffered() > 0:
		_ = fw.JSON(control.FrameDone, control.Done{Code: control.CodeInvalid, Error: "send nothing after a port request before its answer"})
		return
	case req.Port < 1 || req.Port > 65535:
		_ = fw.JSON(control.FrameDone, control.Done{Code: control.CodeInvalid, Error: fmt.Sprintf("port %d is not in 1..65535", req.Port)})
		return
	}
	tc, err := dialOwnPort(req.Port)
	if err != nil {
		_ = fw.JSON(control.FrameDone, portError(req.Port, err))
		return
	}
	defer tc.Close()
	if fw.Frame(control.FrameStarted, nil) != nil {
		return
	}
	splice(uc, tc)
}

// dialOwnPort connects to port on the sandbox's loopback: 127.0.0.1, or
// [::1] when nothing listens there (a server bound to "localhost" may have
// taken only the IPv6 one).
func dialOwnPort(port int) (*net.TCPConn, error) {
	d := net.Dialer{Timeout: portDialTimeout}
	p := strconv.Itoa(port)
	c, err := d.Dial("tcp4", net.JoinHostPort("127.0.0.1", p))
	if errors.Is(err, syscall.ECONNREFUSED) {
		if c6, err6 := d.Dial("tcp6", net.JoinHostPort("::1", p)); err6 == nil {
			c, err = c6, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// portError is the done frame of a connection to port that failed with err.
func portError(port int, err error) control.Done {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return control.Done{Code: control.CodeRefused,
			Error: fmt.Sprintf("nothing listens on port %d in the sandbox (127.0.0.1:%d refused the connection)", port, port)}
	case errors.As(err, &ne) && ne.Timeout():
		return control.Done{Code: control.CodeFailed,
			Error: fmt.Sprintf("port %d in the sandbox did not take the connection within %v (its server's accept queue is full)", port, portDialTimeout)}
	}
	return control.Done{Code: control.CodeFailed, Error: fmt.Sprintf("connect to port %d in the sandbox: %v", port, err)}
}

// splice carries bytes between the client's connection uc and the
// sandbox's tcp until either ends: the client's end (it closes when it is
// done) closes tcp; tcp's end of writing is passed on as uc's, and the
// client then closes. Both copies are splice(2) from socket to socket.
func splice(uc *net.UnixConn, tcp *net.TCPConn) {
	fromClient := make(chan struct{})
	go func() {
		defer close(fromClient)
		_, _ = io.Copy(tcp, uc)
		tcp.Close()
	}()
	_, _ = io.Copy(uc, tcp)
	_ = uc.CloseWrite()
	<-fromClient
}

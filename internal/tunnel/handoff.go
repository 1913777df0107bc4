package tunnel

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// handoffByte is the one byte a handed-over descriptor travels with. It is
// never the first byte of an HTTP request (those start with an upper-case
// method), so the receiver tells a handoff from a plain request by it.
const handoffByte = 0

// ErrHandoff is returned (wrapped) by Take for a descriptor it refuses.
var ErrHandoff = errors.New("tunnel: refused handoff")

// Hand gives c's descriptor to the process at the other end of u
// (SCM_RIGHTS, with one zero byte), so that it serves c itself and no byte
// of c need cross this process: the in-sandbox bridge hands each client
// connection to the worker's proxy this way. The caller then closes its
// own copies of c and u. Errors: c has no descriptor, or the send failed
// (c is untouched then, and may be served another way).
func Hand(u *net.UnixConn, c syscall.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("hand over: %w", err)
	}
	var sendErr error
	if err := rc.Control(func(fd uintptr) {
		_, _, sendErr = u.WriteMsgUnix([]byte{handoffByte}, syscall.UnixRights(int(fd)), nil)
	}); err != nil {
		return fmt.Errorf("hand over: %w", err)
	}
	if sendErr != nil {
		return fmt.Errorf("hand over: %w", sendErr)
	}
	return nil
}

// Take reads the first byte of u. When it comes with a descriptor (Hand),
// Take returns that connection, after checking that it is a connected TCP
// socket: anything else is closed and refused with ErrHandoff, as are more
// descriptors than one (the kernel discards those that do not fit) and a
// descriptor with any other byte. Without a descriptor it returns the byte
// read, the first of u's own stream. Received descriptors are close-on-exec
// (Go reads with MSG_CMSG_CLOEXEC). Errors: the read error (io.EOF for a
// connection closed before a byte), or ErrHandoff.
func Take(u *net.UnixConn) (handed net.Conn, first []byte, err error) {
	buf := make([]byte, 1)
	oob := make([]byte, syscall.CmsgSpace(4)) // room for one descriptor
	n, oobn, flags, _, err := u.ReadMsgUnix(buf, oob)
	fds, perr := rights(oob[:oobn])
	switch {
	case perr != nil:
		closeAll(fds)
		return nil, nil, fmt.Errorf("%w: %v", ErrHandoff, perr)
	case flags&syscall.MSG_CTRUNC != 0:
		closeAll(fds)
		return nil, nil, fmt.Errorf("%w: more than one descriptor", ErrHandoff)
	case len(fds) == 0 && n == 0:
		return nil, nil, err
	case len(fds) == 0:
		return nil, buf[:n], nil
	case n != 1 || buf[0] != handoffByte || len(fds) != 1:
		closeAll(fds)
		return nil, nil, fmt.Errorf("%w: %d descriptors with %d bytes", ErrHandoff, len(fds), n)
	}
	c, err := adopt(fds[0])
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrHandoff, err)
	}
	return c, nil, nil
}

// rights returns the descriptors of a control message.
func rights(oob []byte) ([]int, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		got, err := syscall.ParseUnixRights(&m)
		if err != nil {
			closeAll(fds)
			return nil, err
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		_ = syscall.Close(fd)
	}
}

// adopt turns fd into a net.Conn if it is a connected TCP stream socket,
// and closes fd either way (the Conn holds its own copy).
func adopt(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "handed-over") // closes fd, once
	defer f.Close()
	if err := checkTCP(fd); err != nil {
		return nil, err
	}
	return net.FileConn(f) // a copy of fd
}

// checkTCP fails unless fd is a connected TCP stream socket.
func checkTCP(fd int) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFSOCK {
		return fmt.Errorf("not a socket (%v)", err)
	}
	for _, o := range []struct {
		name string
		opt  int
		ok   func(int) bool
	}{
		{"domain", syscall.SO_DOMAIN, func(v int) bool { return v == syscall.AF_INET || v == syscall.AF_INET6 }},
		{"type", syscall.SO_TYPE, func(v int) bool { return v == syscall.SOCK_STREAM }},
		{"protocol", syscall.SO_PROTOCOL, func(v int) bool { return v == syscall.IPPROTO_TCP }},
		{"listening", syscall.SO_ACCEPTCONN, func(v int) bool { return v == 0 }},
	} {
		v, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, o.opt)
		if err != nil || !o.ok(v) {
			return fmt.Errorf("not a connected TCP socket (%s %d, %v)", o.name, v, err)
		}
	}
	if _, err := syscall.Getpeername(fd); err != nil {
		return fmt.Errorf("not connected: %w", err)
	}
	return nil
}

// Package unixsock makes unix sockets that have no name on disk: a socket
// is bound to a temporary path, an O_PATH descriptor of it is kept, and the
// path is removed at once. Whoever holds that descriptor connects through
// /proc/self/fd (Dial); nobody else can find, replace or link to the
// socket. The sandbox runtime uses it for each sandbox's control channel
// and the egress proxy for each sandbox's way out, so nothing a sandbox can
// write or rename ever stands in for either.
package unixsock

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Hidden is a listening unix socket without a name on disk.
type Hidden struct {
	// Listener is the listening socket (close-on-exec). Hand it to the
	// process that accepts, or wrap it with net.FileListener.
	Listener *os.File
	// Path is an O_PATH descriptor of the socket's inode (close-on-exec):
	// Dial connects through it, and a process it is handed to connects
	// through /proc/self/fd/N.
	Path *os.File
}

// Close closes both descriptors; the socket ends once every copy of its
// listening descriptor is closed.
func (h *Hidden) Close() error {
	err := h.Listener.Close()
	if perr := h.Path.Close(); err == nil {
		err = perr
	}
	return err
}

// Listen makes a listening socket with a queue of backlog connections,
// bound to path (which must not exist, in a directory only root can write)
// and reachable only through the returned Path descriptor: path is removed
// before Listen returns. When uid is not negative, the socket belongs to uid
// with mode 0600, so that a process running as uid may connect through the
// descriptor; otherwise only root may. Errors name the step that failed.
func Listen(path string, backlog, uid int) (*Hidden, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("hidden socket: %w", err)
	}
	ln := os.NewFile(uintptr(fd), "unix-listener")
	fail := func(step string, err error) (*Hidden, error) {
		ln.Close()
		_ = unix.Unlink(path)
		return nil, fmt.Errorf("hidden socket %s: %s: %w", path, step, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		ln.Close()
		return nil, fmt.Errorf("hidden socket %s: bind: %w", path, err)
	}
	if uid >= 0 {
		if err := unix.Fchownat(unix.AT_FDCWD, path, uid, -1, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fail("chown", err)
		}
		if err := unix.Fchmodat(unix.AT_FDCWD, path, 0o600, 0); err != nil {
			return fail("chmod", err)
		}
	}
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail("open", err)
	}
	p := os.NewFile(uintptr(pfd), "unix-socket-path")
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		p.Close()
		return fail("check", fmt.Errorf("not the socket just bound (%v)", err))
	}
	if err := unix.Unlink(path); err != nil {
		p.Close()
		return fail("unlink", err)
	}
	if err := unix.Listen(fd, backlog); err != nil {
		p.Close()
		ln.Close()
		return nil, fmt.Errorf("hidden socket %s: listen: %w", path, err)
	}
	return &Hidden{Listener: ln, Path: p}, nil
}

// ProcPath is the path through which the holder of fd (an O_PATH
// descriptor of a socket, at this number in the holder's table) connects.
func ProcPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// Dial connects to the socket of the O_PATH descriptor p.
func Dial(ctx context.Context, p *os.File) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", ProcPath(int(p.Fd())))
	if err != nil {
		return nil, fmt.Errorf("connect to hidden socket: %w", err)
	}
	return c, nil
}

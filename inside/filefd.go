package inside

import (
	"errors"
	"net"
	"os"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/sandbox/control"
)

// uploadPipe is the buffer asked for the pipe of an OpPutFD (the most an
// unprivileged process may set by default): fewer wake-ups of either side.
const uploadPipe = 1 << 20

// fileFD runs OpGetFD or OpPutFD on c (see their docs in control).
func (s *initServer) fileFD(c *net.UnixConn, req control.Request, fr *control.Reader) control.Done {
	if req.Op == control.OpGetFD {
		f, done := s.openRegular(req.Path)
		if f == nil {
			return done
		}
		defer f.Close()
		if err := control.SendFD(c, int(f.Fd())); err != nil {
			return control.Done{Code: control.CodeFailed, Error: "send " + req.Path + ": " + err.Error()}
		}
		return control.Done{}
	}
	return s.putFD(c, req, fr)
}

// putFD answers OpPutFD: as put (an unnamed file linked into place only
// when all of the content came), with the content through a pipe whose
// write end it sends to the client. The init itself writes the file, so
// its pages are charged to the sandbox's cgroup.
func (s *initServer) putFD(c *net.UnixConn, req control.Request, fr *control.Reader) control.Done {
	ws := int(s.workspace.Fd())
	rel, err := control.WorkspaceRel(req.Path)
	if err != nil || rel == "." {
		return fileDone(req.Path, control.ErrPath)
	}
	mode := os.FileMode(req.Mode).Perm()
	if mode == 0 {
		mode = 0o644
	}
	if err := checkPutTarget(ws, rel); err != nil {
		return fileDone(req.Path, err)
	}
	fd, err := openAt(ws, ".", unix.O_TMPFILE|unix.O_WRONLY, 0o600, resolveBeneath)
	if err != nil {
		return fileDone(req.Path, err)
	}
	tmp := os.NewFile(uintptr(fd), "upload")
	defer tmp.Close() // an unnamed file that was not linked goes with it
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return control.Done{Code: control.CodeFailed, Error: "upload pipe: " + err.Error()}
	}
	_, _ = unix.FcntlInt(uintptr(p[0]), unix.F_SETPIPE_SZ, uploadPipe) // a smaller pipe only costs wake-ups
	err = control.SendFD(c, p[1])
	unix.Close(p[1])
	if err != nil {
		unix.Close(p[0])
		return control.Done{Code: control.CodeFailed, Error: "send the upload pipe: " + err.Error()}
	}
	werr := pipeToFile(p[0], fd)
	unix.Close(p[0]) // a client still writing gets EPIPE
	if werr != nil {
		return fileDone(req.Path, werr)
	}
	if err := drain(fr, nil); err != nil {
		return control.Done{Code: control.CodeFailed, Error: req.Path + ": the upload ended before its end; nothing was written"}
	}
	if err := tmp.Chmod(mode); err != nil { // exactly mode, whatever the umask
		return fileDone(req.Path, err)
	}
	if err := linkInto(ws, rel, tmp); err != nil {
		return fileDone(req.Path, err)
	}
	return control.Done{}
}

// pipeToFile moves what pipe brings into file until the pipe's end:
// splice(2), or, where it is refused before anything moved, read and write.
func pipeToFile(pipe, file int) error {
	moved := false
	for {
		n, err := unix.Splice(pipe, nil, file, nil, uploadPipe, unix.SPLICE_F_MOVE)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil && !moved && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM)):
			return copyPipe(pipe, file)
		case err != nil:
			return err
		case n == 0:
			return nil
		}
		moved = true
	}
}

// copyPipe is pipeToFile by read and write.
func copyPipe(pipe, file int) error {
	buf := make([]byte, 256<<10)
	for {
		n, err := unix.Read(pipe, buf)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return err
		case n == 0:
			return nil
		}
		for b := buf[:n]; len(b) > 0; {
			m, err := unix.Write(file, b)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return err
			}
			b = b[m:]
		}
	}
}

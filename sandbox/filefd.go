package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/sandbox/control"
)

// fdReply is the start of the reply to an OpGetFD or OpPutFD: the
// descriptor the init sent (file), or the done frame of its error.
type fdReply struct {
	c    *net.UnixConn
	fw   *control.Writer
	end  func()
	file *os.File
	done control.Done
}

// startFD sends req to sandbox id's init and reads the first frame of the
// reply. Errors: ErrNotFound; the connection's.
func (r *Runtime) startFD(ctx context.Context, id string, req control.Request) (*fdReply, error) {
	b, err := r.get(id)
	if err != nil {
		return nil, err
	}
	c, fw, end, err := r.request(ctx, b, req)
	if err != nil {
		return nil, err
	}
	uc, ok := unixConnOf(c)
	if !ok {
		end()
		return nil, fmt.Errorf("connect to sandbox %s: the control socket is a %T", id, c)
	}
	fd, reply, err := control.RecvFD(uc)
	if err != nil {
		end()
		if berr := b.brokenErr(); berr != nil {
			return nil, berr
		}
		return nil, ctxOr(ctx, err)
	}
	rep := &fdReply{c: uc, fw: fw, end: end}
	if fd < 0 {
		rep.done, err = readReplyFrom(reply, nil)
		if err != nil {
			end()
			return nil, ctxOr(ctx, err)
		}
		return rep, nil
	}
	// Non-blocking, so that the runtime's poller waits on a pipe and
	// closing it ends a write that waits (a regular file ignores it).
	_ = unix.SetNonblock(fd, true)
	rep.file = os.NewFile(uintptr(fd), req.Path)
	return rep, nil
}

// ctxOr is ctx's error once it ended, else err.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// getViaFD copies the file the init opened for req (OpGetFD) to w; the
// kernel copies it once, from the sandbox's page cache. The descriptor
// must be a regular file of a tmpfs (the workspace's). Errors: as
// fileOp's.
func (r *Runtime) getViaFD(ctx context.Context, id string, req control.Request, w io.Writer) (control.Done, error) {
	rep, err := r.startFD(ctx, id, req)
	if err != nil {
		return control.Done{}, err
	}
	defer rep.end()
	if rep.file == nil {
		return rep.done, codeError(rep.done)
	}
	defer rep.file.Close()
	if err := checkWorkspaceFile(rep.file); err != nil {
		return control.Done{}, err
	}
	ow := &outputWriter{w: w}
	if rf, ok := w.(io.ReaderFrom); ok {
		_, err = rf.ReadFrom(rep.file)
	} else {
		_, err = io.CopyBuffer(ow, struct{ io.Reader }{rep.file}, make([]byte, uploadFrame))
	}
	if err != nil {
		if ow.err != nil || ctx.Err() == nil {
			return control.Done{}, fmt.Errorf("%w: %w", errOutput, err)
		}
		return control.Done{}, ctx.Err()
	}
	done, err := readReplyFrom(rep.c, nil)
	if err != nil {
		return done, ctxOr(ctx, err)
	}
	return done, codeError(done)
}

// checkWorkspaceFile refuses a descriptor that is not a regular file of a
// tmpfs: the init opens only files of the workspace, so anything else
// means that something in the sandbox answered in its place.
func checkWorkspaceFile(f *os.File) error {
	var st unix.Stat_t
	var fs unix.Statfs_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("check the init's file: %w", err)
	}
	if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil {
		return fmt.Errorf("check the init's file: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || fs.Type != unix.TMPFS_MAGIC {
		return fmt.Errorf("the init sent a descriptor that is not a workspace file (mode %#o, file system %#x)", st.Mode, fs.Type)
	}
	return nil
}

// checkPipe refuses a descriptor that is not a pipe: the worker writes an
// upload only into the pipe the init made, never into a file (whose pages
// the worker's writes would charge to the worker, not to the sandbox).
func checkPipe(f *os.File) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("check the init's pipe: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return fmt.Errorf("the init sent a descriptor that is not a pipe (mode %#o)", st.Mode)
	}
	return nil
}

// outputWriter keeps the error of the writer it writes to, so that a
// failed write is told from a failed read.
type outputWriter struct {
	w   io.Writer
	err error
}

func (o *outputWriter) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err != nil {
		o.err = err
	}
	return n, err
}

// putViaFD sends src through the pipe the init gave for req (OpPutFD),
// then the end frame when src ended with io.EOF; when src fails or ctx
// ends, the connection ends without it and the init discards the file.
// Errors: as fileOp's.
func (r *Runtime) putViaFD(ctx context.Context, id string, req control.Request, src io.Reader) error {
	rep, err := r.startFD(ctx, id, req)
	if err != nil {
		return err
	}
	defer rep.end()
	if rep.file == nil {
		return codeError(rep.done)
	}
	pipe := rep.file
	if err := checkPipe(pipe); err != nil {
		pipe.Close()
		return err
	}
	stop := context.AfterFunc(ctx, func() { pipe.Close() })
	in := &sourceReader{r: src}
	copyErr := fillTo(pipe, in)
	stop()
	pipe.Close() // the init sees the pipe's end
	var sendErr error
	if copyErr == nil {
		sendErr = rep.fw.Frame(control.FrameEnd, nil)
	} else {
		closeWrite(rep.c)
	}
	done, err := readReplyFrom(rep.c, nil)
	switch {
	case in.err != nil:
		return fmt.Errorf("read upload: %w", in.err)
	case ctx.Err() != nil && (err != nil || copyErr != nil || sendErr != nil):
		return ctx.Err()
	case err != nil:
		return errors.Join(sendErr, err)
	case done.Code != "":
		return codeError(done)
	case copyErr != nil:
		return copyErr
	case sendErr != nil:
		return sendErr
	}
	return nil
}

// fillTo copies r to w in writes of uploadFrame bytes (the last may be
// shorter): an HTTP body's reads are a few KiB each, and each write to the
// pipe wakes the init. Errors: r's (not io.EOF), w's.
func fillTo(w io.Writer, r io.Reader) error {
	buf := make([]byte, uploadFrame)
	for {
		n, err := fill(r, buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("read input: %w", err)
		}
	}
}

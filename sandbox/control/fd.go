package control

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// FrameFD is a frame without payload whose first byte carries one
// descriptor (SCM_RIGHTS): OpGetFD's file, OpPutFD's pipe. The init sends
// it as its first frame, and only the init sends it: the runtime reads the
// reply's first frame with RecvFD, so that the descriptor is not lost to a
// buffered read.
const FrameFD = 'F'

// The operations whose content crosses as a descriptor instead of frames:
// a 100 MiB file through the API moved at about 0.25× a host `cp`
// through data frames (every byte copied through the control socket, twice
// into and out of the kernel); with the descriptor it is copied once, by
// the kernel, between the file and the pipe or the HTTP connection.
const (
	// OpGetFD is OpGet answered with the file's descriptor, opened read-only
	// by the init beneath the workspace (FrameFD, then Done), or with Done
	// alone for an error.
	OpGetFD = "get-fd"
	// OpPutFD is OpPut whose content comes through a pipe: the init opens
	// the unnamed file, then sends the pipe's write end (FrameFD) and moves
	// what the pipe brings into the file, itself, so that the file's pages
	// are charged to the sandbox's cgroup. The client writes the content to
	// the pipe, closes it, then sends FrameEnd when all of it was sent (or
	// ends the connection when it failed); the init links the file into
	// place only after the pipe's end and FrameEnd. Errors before the pipe
	// are a Done alone.
	OpPutFD = "put-fd"
)

// SendFD sends a FrameFD carrying fd on c.
func SendFD(c *net.UnixConn, fd int) error {
	hdr := []byte{FrameFD, 0, 0, 0, 0}
	n, oobn, err := c.WriteMsgUnix(hdr, syscall.UnixRights(fd), nil)
	if err != nil {
		return fmt.Errorf("send descriptor: %w", err)
	}
	if n != len(hdr) || oobn == 0 {
		return errors.New("send descriptor: short write")
	}
	return nil
}

// RecvFD reads the header of the first frame of a reply on c. For a
// FrameFD it returns the descriptor it carried (the caller's to close);
// for any other frame it returns fd -1 and a reader of the whole reply
// (that header, then c) for NewReader. Errors: the read failed, or a
// FrameFD came without exactly one descriptor.
func RecvFD(c *net.UnixConn) (fd int, reply io.Reader, err error) {
	var hdr [5]byte
	oob := make([]byte, syscall.CmsgSpace(4*4))
	n, oobn, _, _, err := c.ReadMsgUnix(hdr[:], oob)
	if err != nil {
		return -1, nil, fmt.Errorf("read reply: %w", err)
	}
	fds, perr := parseRights(oob[:oobn])
	if hdr[0] != FrameFD || n == 0 {
		closeAll(fds)
		return -1, io.MultiReader(bytes.NewReader(hdr[:n]), c), nil
	}
	if perr != nil || len(fds) != 1 {
		closeAll(fds)
		return -1, nil, fmt.Errorf("read reply: a descriptor frame with %d descriptors (%v)", len(fds), perr)
	}
	if _, err := io.ReadFull(c, hdr[n:]); err != nil {
		syscall.Close(fds[0])
		return -1, nil, fmt.Errorf("read reply: %w", err)
	}
	return fds[0], nil, nil
}

// parseRights returns the descriptors of the SCM_RIGHTS messages in oob.
func parseRights(oob []byte) ([]int, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		got, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

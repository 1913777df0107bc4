package control

import (
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

// TestFD: a descriptor sent with SendFD arrives with RecvFD; a reply that
// starts with another frame is read whole.
func TestFD(t *testing.T) {
	pair := func(t *testing.T) (*net.UnixConn, *net.UnixConn) {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		conn := func(fd int) *net.UnixConn {
			f := os.NewFile(uintptr(fd), "sock")
			defer f.Close()
			c, err := net.FileConn(f)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c.(*net.UnixConn)
		}
		return conn(fds[0]), conn(fds[1])
	}
	t.Run("OK", func(t *testing.T) {
		a, b := pair(t)
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		defer w.Close()
		if err := SendFD(a, int(w.Fd())); err != nil {
			t.Fatal(err)
		}
		fd, reply, err := RecvFD(b)
		if err != nil || fd < 0 || reply != nil {
			t.Fatalf("RecvFD = %d, %v, %v; want a descriptor", fd, reply, err)
		}
		got := os.NewFile(uintptr(fd), "got")
		defer got.Close()
		if _, err := got.Write([]byte("hi")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2)
		if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "hi" {
			t.Fatalf("through the passed pipe: %q, %v", buf, err)
		}
	})
	t.Run("OKDoneInstead", func(t *testing.T) {
		a, b := pair(t)
		if err := NewWriter(a).JSON(FrameDone, Done{Code: CodeNotExist, Error: "x: no such file"}); err != nil {
			t.Fatal(err)
		}
		fd, reply, err := RecvFD(b)
		if err != nil || fd != -1 || reply == nil {
			t.Fatalf("RecvFD = %d, %v, %v; want the reply", fd, reply, err)
		}
		kind, p, err := NewReader(reply).Next()
		if err != nil || kind != FrameDone || string(p) != `{"exit_code":0,"code":"not_exist","error":"x: no such file"}` {
			t.Fatalf("the reply's frame: %c %s %v", kind, p, err)
		}
	})
	t.Run("ErrFrameWithoutDescriptor", func(t *testing.T) {
		a, b := pair(t)
		if _, err := a.Write([]byte{FrameFD, 0, 0, 0, 0}); err != nil {
			t.Fatal(err)
		}
		if fd, _, err := RecvFD(b); err == nil {
			t.Fatalf("RecvFD = %d, want an error", fd)
		}
	})
}

package tunnel

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// unixPair returns two connected unix stream sockets.
func unixPair(tb testing.TB) (*net.UnixConn, *net.UnixConn) {
	tb.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(tb testing.TB) (client, server *net.TCPConn) {
	tb.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

func openFDs(tb testing.TB) int {
	tb.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatal(err)
	}
	return len(ents)
}

// TestHandTake: a connection handed over is served by the receiver, its
// bytes flowing between the client and the receiver only.
func TestHandTake(t *testing.T) {
	a, b := unixPair(t)
	client, server := tcpPair(t)
	if err := Hand(a, server); err != nil {
		t.Fatal(err)
	}
	server.Close() // the sender keeps no copy
	got, first, err := Take(b)
	if err != nil || got == nil || first != nil {
		t.Fatalf("Take = %v %q %v", got, first, err)
	}
	defer got.Close()
	got.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(client, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(got, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read through the handed connection: %q %v", buf, err)
	}
}

func TestTakePlainStream(t *testing.T) {
	a, b := unixPair(t)
	io.WriteString(a, "GET / HTTP/1.1\r\n")
	got, first, err := Take(b)
	if err != nil || got != nil || string(first) != "G" {
		t.Fatalf("Take = %v %q %v, want the first byte", got, first, err)
	}
	rest := make([]byte, 15)
	if _, err := io.ReadFull(b, rest); err != nil || string(rest) != "ET / HTTP/1.1\r\n" {
		t.Fatalf("the rest of the stream: %q %v", rest, err)
	}
}

func TestTakeEOF(t *testing.T) {
	a, b := unixPair(t)
	a.Close()
	if got, first, err := Take(b); got != nil || first != nil || !errors.Is(err, io.EOF) {
		t.Fatalf("Take of a closed connection = %v %q %v, want io.EOF", got, first, err)
	}
}

// TestTakeRefuses: whatever else a sandbox could send with a descriptor is
// refused, and every descriptor it sent is closed.
func TestTakeRefuses(t *testing.T) {
	pipeR, pipeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pipeR.Close()
	defer pipeW.Close()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	lnFile, _ := ln.(*net.TCPListener).File()
	defer lnFile.Close()
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	udpFile, _ := udp.(*net.UDPConn).File()
	defer udpFile.Close()
	other, _ := unixPair(t)
	otherFile, _ := other.File()
	defer otherFile.Close()
	_, tcp := tcpPair(t)
	tcpFile, _ := tcp.File()
	defer tcpFile.Close()
	for _, tc := range []struct {
		name string
		data []byte
		fds  []int
	}{
		{"Pipe", []byte{0}, []int{int(pipeR.Fd())}},
		{"ListeningTCP", []byte{0}, []int{int(lnFile.Fd())}},
		{"UDP", []byte{0}, []int{int(udpFile.Fd())}},
		{"UnixSocket", []byte{0}, []int{int(otherFile.Fd())}},
		{"TwoDescriptors", []byte{0}, []int{int(tcpFile.Fd()), int(tcpFile.Fd())}},
		{"WithAnotherByte", []byte{'G'}, []int{int(tcpFile.Fd())}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := unixPair(t)
			before := openFDs(t)
			if _, _, err := a.WriteMsgUnix(tc.data, syscall.UnixRights(tc.fds...), nil); err != nil {
				t.Fatal(err)
			}
			got, _, err := Take(b)
			if got != nil || !errors.Is(err, ErrHandoff) {
				t.Fatalf("Take = %v %v, want ErrHandoff", got, err)
			}
			if after := openFDs(t); after != before {
				t.Fatalf("%d descriptors open after the refusal, %d before: a received one leaked", after, before)
			}
		})
	}
}

package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox/control"
)

// portServer is a python3 server in the sandbox on ADDR: it greets each
// connection with "hi\n" before reading anything, echoes what it reads,
// and on a line "bye" answers "done" and shuts its writing down, then
// waits for the client to close.
const portServer = `
import socket, sys, threading
host, port = sys.argv[1], int(sys.argv[2])
fam = socket.AF_INET6 if ":" in host else socket.AF_INET
ln = socket.socket(fam)
ln.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ln.bind((host, port))
ln.listen(64)
def serve(c):
    c.sendall(b"hi\n")
    buf = b""
    while True:
        d = c.recv(65536)
        if not d:
            break
        buf += d
        if buf.endswith(b"bye\n"):
            c.sendall(buf[:-4])
            c.sendall(b"done")
            c.shutdown(socket.SHUT_WR)
            buf = b""
            continue
        if len(buf) > 1 << 16:
            c.sendall(buf); buf = b""
    c.sendall(buf)
    c.close()
while True:
    c, _ = ln.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`

// startPortServer starts portServer on host:port in sandbox id and waits
// until DialPort reaches it.
func startPortServer(t *testing.T, rt *Runtime, id, host string, port int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := rt.Start(ctx, id, agentsandbox.ExecRequest{Argv: []string{"python3", "-c", portServer, host, strconv.Itoa(port)}}); err != nil {
		t.Fatalf("start the server: %v", err)
	}
	for {
		c, err := rt.DialPort(ctx, id, port)
		if err == nil {
			c.Close()
			return
		}
		if !errors.Is(err, ErrPortClosed) || ctx.Err() != nil {
			t.Fatalf("DialPort while the server starts: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDialPort reaches servers on a real sandbox's own loopback through its
// init: a greeting sent before the client wrote arrives whole, a MiB goes
// both ways, the server's shutdown reads as EOF; an IPv6-only server is
// found on [::1]; a closed port is ErrPortClosed naming it; a port out of
// range is ErrInvalid; and connections leave no descriptor behind in the
// init.
func TestDialPort(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	info := newBox(t, rt, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	_, err := rt.DialPort(ctx, info.ID, 8000)
	if !errors.Is(err, ErrPortClosed) || !strings.Contains(err.Error(), "port 8000") {
		t.Fatalf("DialPort with nothing listening: %v, want ErrPortClosed naming port 8000", err)
	}
	for _, p := range []int{0, -1, 65536} {
		if _, err := rt.DialPort(ctx, info.ID, p); !errors.Is(err, ErrInvalid) {
			t.Errorf("DialPort(%d): %v, want ErrInvalid", p, err)
		}
	}
	if _, err := rt.DialPort(ctx, "nope", 8000); !errors.Is(err, ErrNotFound) {
		t.Errorf("DialPort of an unknown sandbox: %v, want ErrNotFound", err)
	}

	startPortServer(t, rt, info.ID, "127.0.0.1", 8000)
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	exchange := func(port int) {
		t.Helper()
		c, err := rt.DialPort(ctx, info.ID, port)
		if err != nil {
			t.Fatalf("DialPort %d: %v", port, err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(testTimeout))
		br := bufio.NewReader(c)
		if line, err := br.ReadString('\n'); err != nil || line != "hi\n" {
			t.Fatalf("greeting %q %v", line, err)
		}
		go func() { _, _ = c.Write(append(payload[:len(payload):len(payload)], "bye\n"...)) }()
		got, err := io.ReadAll(br)
		if err != nil || !bytes.Equal(got, append(payload[:len(payload):len(payload)], "done"...)) {
			t.Fatalf("echo: %d bytes %v, want the MiB and done, then EOF", len(got), err)
		}
	}
	exchange(8000)

	if v6 := shOK(t, rt, info.ID, "cat /proc/net/if_inet6 2>/dev/null | grep -c '^0*1 ' || true"); strings.TrimSpace(v6) != "0" {
		startPortServer(t, rt, info.ID, "::1", 8001)
		exchange(8001)
	} else {
		t.Log("the sandbox's loopback has no ::1: the IPv6 fallback is not exercised")
	}

	initPid := initOf(t, rt, info.ID)
	before := fdCount(t, initPid)
	for range 200 {
		c, err := rt.DialPort(ctx, info.ID, 8000)
		if err != nil {
			t.Fatalf("DialPort: %v", err)
		}
		c.Close()
	}
	// The init lets go of a connection a moment after the client closed it.
	deadline := time.Now().Add(testTimeout)
	for fdCount(t, initPid) > before+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := fdCount(t, initPid); n > before+2 {
		t.Fatalf("the init holds %d descriptors after 200 closed connections, %d before", n, before)
	}
}

// initOf returns the host pid of sandbox id's init.
func initOf(t *testing.T, rt *Runtime, id string) int {
	t.Helper()
	pids, err := rt.HostPids(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if strings.HasSuffix(string(b), "\x00"+control.InitMarker+"\x00") {
			return pid
		}
	}
	t.Fatalf("no init among %v", pids)
	return 0
}

// fdCount is the number of descriptors process pid holds.
func fdCount(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

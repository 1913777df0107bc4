package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// startServerCmd runs cmd (an `ovlive serve --listen 127.0.0.1:0 …`,
// perhaps through a shell) as startServer does.
func startServerCmd(tb testing.TB, cmd *exec.Cmd) *server {
	tb.Helper()
	s := &server{done: make(chan struct{}), cmd: cmd}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	addr := make(chan string, 1)
	go s.readLog(stderr, addr)
	tb.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
	select {
	case s.addr = <-addr:
	case <-s.done:
		tb.Fatalf("ovlive serve exited (%v) before listening:\n%s", s.err, s.logText())
	case <-time.After(2 * time.Minute):
		tb.Fatalf("ovlive serve did not log its address:\n%s", s.logText())
	}
	return s
}

// TestServeIdleFlood: a flood of idle keep-alive connections, from many
// client addresses and more than the process may hold open (its file limit
// is 256 here), leaves a real check-in answering within a second: the
// server caps its connections below its file limit (at most 256 per client,
// idle ones make room for new ones), so it never runs out of descriptors.
// Every connection is on loopback (127.0.0.0/8).
func TestServeIdleFlood(t *testing.T) {
	w := setup(t, sqliteDB(t), "", 1)
	s := startServerCmd(t, exec.Command("sh", "-c", `ulimit -n 256 && exec "$0" "$@"`, binary, "serve", "--listen", "127.0.0.1:0", "--db", w.db))
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			_ = c.Close()
		}
	})
	var wg sync.WaitGroup
	for a := range 20 {
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(a+1))}, Timeout: 5 * time.Second}
			for range 40 {
				c, err := d.Dial("tcp", s.addr)
				if err != nil {
					continue
				}
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				// One request, so that the connection is kept alive and idle.
				if _, err := io.WriteString(c, "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n"); err == nil {
					_, _ = c.Read(make([]byte, 4096))
				}
				_ = c.SetDeadline(time.Time{})
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 3 {
		start := time.Now()
		status, _, err := checkIn(t.Context(), c, s, w, w.streams[0], report(t, w.streams[0], i))
		if took := time.Since(start); err != nil || status != http.StatusOK || took > time.Second {
			t.Fatalf("a check-in during the flood: %d, %v, after %s; want 200 within a second\n%s", status, err, took, tail(s.logText(), 20))
		}
	}
	if log := s.logText(); !strings.Contains(log, `"msg":"connections closed to make room"`) || strings.Contains(log, "too many open files") {
		t.Fatalf("the log does not say connections were closed to make room, or says the server ran out of files:\n%s", tail(log, 20))
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("(%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

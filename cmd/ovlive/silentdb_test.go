package main

import (
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// silentListener accepts loopback connections and never answers, as a
// database server that hangs does. It returns its address.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	return ln.Addr().String()
}

// TestSilentDatabaseAtStart: against a PostgreSQL that accepts connections
// and never answers, serve logs which database it opens (never its
// password) and gives up with a message that says so, and so does an admin
// command, each within a bound, instead of waiting for ever.
func TestSilentDatabaseAtStart(t *testing.T) {
	addr := silentListener(t)
	dsn := "postgres://live:s3cret-pw@" + addr + "/live?sslmode=disable"
	for _, args := range [][]string{
		{"serve", "--listen", "127.0.0.1:0", "--db", dsn, "--db-timeout", "1s"},
		{"admin", "--db", dsn, "--db-timeout", "1s", "person", "list"},
	} {
		t.Run(args[0], func(t *testing.T) {
			cmd := exec.Command(binary, args...)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			took := time.Since(start)
			if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 || took > 20*time.Second {
				t.Fatalf("exit %v after %s, want 1 within 20 s:\n%s", err, took, out)
			}
			if !strings.Contains(string(out), "the database did not answer in time") || strings.Contains(string(out), "s3cret-pw") {
				t.Fatalf("the output does not say the database did not answer, or shows the password:\n%s", out)
			}
			if args[0] == "serve" && !strings.Contains(string(out), `"msg":"opening store","db":"postgres://live@`+addr+`/live"`) {
				t.Fatalf("serve does not log which database it opens:\n%s", out)
			}
		})
	}
}

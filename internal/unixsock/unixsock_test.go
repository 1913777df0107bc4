package unixsock

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestListenDial(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	h, err := Listen(path, 4, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the socket still has a name: %v", err)
	}
	ln, err := net.FileListener(h.Listener)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = c.Write([]byte("hello"))
			c.Close()
		}
	}()
	c, err := Dial(context.Background(), h.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, _ := io.ReadAll(c)
	if string(got) != "hello" {
		t.Fatalf("got %q", got)
	}
	// A new socket at the old name is not the hidden one.
	other, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() {
		if c, err := other.Accept(); err == nil {
			_, _ = c.Write([]byte("impostor"))
			c.Close()
		}
	}()
	go func() {
		if c, err := ln.Accept(); err == nil {
			_, _ = c.Write([]byte("hidden"))
			c.Close()
		}
	}()
	c2, err := Dial(context.Background(), h.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, _ := io.ReadAll(c2); string(got) != "hidden" {
		t.Fatalf("Dial reached %q, want the hidden socket", got)
	}
}

func TestListenErrors(t *testing.T) {
	dir := t.TempDir()
	taken := filepath.Join(dir, "taken")
	if err := os.WriteFile(taken, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(taken, 1, -1); err == nil {
		t.Error("Listen over an existing file succeeded")
	}
	if _, err := os.Stat(taken); err != nil {
		t.Errorf("a failed Listen removed what was there: %v", err)
	}
	if _, err := Listen(filepath.Join(dir, "missing", "s"), 1, -1); err == nil {
		t.Error("Listen in a missing directory succeeded")
	}
}

package sqlite

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/live"
	"openvibe.network/agentsandbox/live/storetest"
)

// TestFullDisk: on a real file system that fills up, a check-in and the
// probe fail with EUNAVAILABLE saying the disk is full (a 503 that tells
// the operator what to fix, not an internal error), the report stored
// before stays as it was, and once space is freed the next check-in is
// stored and the database passes SQLite's integrity check, also after a
// reopen.
func TestFullDisk(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=1m,mode=0700"); err != nil {
		t.Fatalf("mount a small tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	path := filepath.Join(dir, "live.db")
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	owner, svc, streams := storetest.Streams(t, s, 1)
	reg := func(report string) live.Registration {
		return live.Registration{StreamID: streams[0], Report: []byte(report), ServiceID: svc.ID, SubjectID: owner.ID}
	}
	first := `{"n":1}`
	if _, err := s.Accept(t.Context(), reg(first)); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	fill(t, filler)

	big := `{"pad":"` + strings.Repeat("x", 64<<10) + `"}` // more than the WAL's free pages
	for name, err := range map[string]error{
		"Accept": func() error { _, err := s.Accept(t.Context(), reg(big)); return err }(),
		"Probe":  s.Probe(t.Context()),
	} {
		if live.ErrorCode(err) != live.EUNAVAILABLE || !strings.Contains(live.ErrorMessage(err), "the disk that holds it is full") {
			t.Errorf("%s on a full disk = %v, want %s saying the disk is full", name, err, live.EUNAVAILABLE)
		}
	}
	if rec, err := s.Worker(t.Context(), streams[0]); err != nil || rec.Registration == nil || string(rec.Registration.Report) != first {
		t.Fatalf("after the failed check-in, Worker = %+v, %v; want the first report kept", rec.Registration, err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Accept(t.Context(), reg(big)); err != nil {
		t.Fatalf("Accept once space is freed: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(t.Context(), path, Options{}); err != nil {
		t.Fatal(err)
	}
	var verdict string
	if err := s.rdb.QueryRowContext(t.Context(), "PRAGMA integrity_check").Scan(&verdict); err != nil || verdict != "ok" {
		t.Fatalf("integrity_check = %q, %v", verdict, err)
	}
	if rec, err := s.Worker(t.Context(), streams[0]); err != nil || rec.Registration == nil || string(rec.Registration.Report) != big {
		t.Fatalf("after a reopen, Worker = %v; want the report stored once space was freed", err)
	}
}

// fill writes zeros to a new file at path until its file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zeros := bytes.Repeat([]byte{0}, 4096)
	for {
		if _, err := f.Write(zeros); errors.Is(err, syscall.ENOSPC) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

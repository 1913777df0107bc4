package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/testenv"
)

func TestBuildEtc(t *testing.T) {
	host := t.TempDir()
	state := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(host, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("shadow", "root:secret")
	write("ssh/ssh_host_key", "key")
	write("ssl/private/key.pem", "key")
	write("ssl/certs/ca-certificates.crt", "certs")
	write("gitconfig", "[credential]")
	write("environment", "HTTPS_PROXY=http://user:secret@proxy.internal:3128")
	write("mime.types", "text/plain txt")
	if err := os.MkdirAll(filepath.Join(host, "alternatives"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin/mawk", filepath.Join(host, "alternatives", "awk")); err != nil {
		t.Fatal(err)
	}
	dir, lock, err := buildEtc(state, host, etcBinds(host))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	for _, tc := range []struct {
		name    string
		present bool
	}{
		{"passwd", true}, {"group", true}, {"hosts", true}, {"resolv.conf", true}, {"mtab", true},
		{"mime.types", true},
		// Bound from the host over empty directories, never copied.
		{"ssl/certs", true}, {"alternatives", true}, {"ssl/certs/ca-certificates.crt", false}, {"alternatives/awk", false},
		{"shadow", false}, {"ssh", false}, {"ssl/private", false}, {"gitconfig", false},
		{"environment", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := os.Lstat(filepath.Join(dir, tc.name))
			if tc.present && err != nil {
				t.Fatalf("missing: %v", err)
			}
			if !tc.present && !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("copied into the sandbox's /etc (%v)", err)
			}
		})
	}
	if got, want := etcBinds(host), []string{"alternatives", "ssl/certs"}; !slices.Equal(got, want) {
		t.Fatalf("etcBinds = %q, want %q", got, want)
	}
	again, lock2, err := buildEtc(state, host, etcBinds(host))
	if err != nil || again != dir {
		t.Fatalf("second build: %q %v, want the shared %q", again, err, dir)
	}
	lock2.Close()
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(host, "mime.types"), later, later); err != nil {
		t.Fatal(err)
	}
	changed, lock3, err := buildEtc(state, host, etcBinds(host))
	if err != nil || changed == dir {
		t.Fatalf("after a host change: %q %v, want a new copy", changed, err)
	}
	lock3.Close()
}

// writeHostEtc makes a small host /etc in a temporary directory.
func writeHostEtc(tb testing.TB) string {
	tb.Helper()
	host := tb.TempDir()
	if err := os.WriteFile(filepath.Join(host, "mime.types"), []byte("text/plain txt\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	return host
}

// touchHost changes the host /etc's fingerprint.
func touchHost(tb testing.TB, host string, d time.Duration) {
	tb.Helper()
	at := time.Now().Add(d)
	if err := os.Chtimes(filepath.Join(host, "mime.types"), at, at); err != nil {
		tb.Fatal(err)
	}
}

func exists(tb testing.TB, path string) bool {
	tb.Helper()
	_, err := os.Lstat(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		tb.Fatal(err)
	}
	return err == nil
}

// TestRemoveUnusedEtc: a copy goes once no one holds it (however many
// shared it), the copy in use stays, and so does what is not a copy.
func TestRemoveUnusedEtc(t *testing.T) {
	host, state := writeHostEtc(t), t.TempDir()
	old, oldA, err := buildEtc(state, host, etcBinds(host))
	if err != nil {
		t.Fatal(err)
	}
	_, oldB, err := buildEtc(state, host, etcBinds(host))
	if err != nil {
		t.Fatal(err)
	}
	touchHost(t, host, time.Hour)
	cur, curLock, err := buildEtc(state, host, etcBinds(host))
	if err != nil {
		t.Fatal(err)
	}
	defer curLock.Close()
	// What a builder or a remover that died left, and what is no copy.
	for _, d := range []string{etcTmpPrefix + "dead", etcGonePrefix + "dead", "etc-0123456789abcdef"} {
		if err := os.MkdirAll(filepath.Join(state, d, "ssl"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(state, "etc-notes"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(state, "etc-link")); err != nil {
		t.Fatal(err)
	}

	remove := func(t *testing.T) {
		t.Helper()
		if err := removeUnusedEtc(state, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("Held", func(t *testing.T) {
		remove(t)
		for _, d := range []string{old, cur} {
			if !exists(t, filepath.Join(d, "passwd")) {
				t.Errorf("%s removed while held", d)
			}
		}
		for _, d := range []string{etcTmpPrefix + "dead", etcGonePrefix + "dead", "etc-0123456789abcdef"} {
			if exists(t, filepath.Join(state, d)) {
				t.Errorf("%s left", d)
			}
		}
		for _, p := range []string{filepath.Join(state, "etc-notes"), filepath.Join(state, "etc-link"), elsewhere} {
			if !exists(t, p) {
				t.Errorf("%s, which is no copy, removed", p)
			}
		}
	})
	t.Run("SharedStaysWhileOneHolds", func(t *testing.T) {
		oldA.Close()
		remove(t)
		if !exists(t, old) {
			t.Fatalf("%s removed while another runtime holds it", old)
		}
	})
	t.Run("GoneOnceNoOneHolds", func(t *testing.T) {
		oldB.Close()
		remove(t)
		if exists(t, old) {
			t.Fatalf("%s left after its last holder ended", old)
		}
		if !exists(t, filepath.Join(cur, "passwd")) {
			t.Fatalf("%s removed while held", cur)
		}
	})
}

// TestBuildEtcWhileRemoved: a runtime that finds a copy as a remover takes
// it builds a new one instead of binding what is being removed.
func TestBuildEtcWhileRemoved(t *testing.T) {
	host, state := writeHostEtc(t), t.TempDir()
	dir, lock, err := buildEtc(state, host, etcBinds(host))
	if err != nil {
		t.Fatal(err)
	}
	lock.Close()
	// Stand in for removeEtcIfUnused between its lock and its rename.
	remover, err := openDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(remover.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	type built struct {
		dir  string
		lock *os.File
		err  error
	}
	done := make(chan built, 1)
	go func() {
		d, l, err := buildEtc(state, host, etcBinds(host))
		done <- built{d, l, err}
	}()
	select {
	case b := <-done:
		t.Fatalf("buildEtc did not wait for the remover: %+v", b)
	case <-time.After(100 * time.Millisecond):
	}
	gone := filepath.Join(state, etcGonePrefix+"test")
	if err := os.Rename(dir, gone); err != nil {
		t.Fatal(err)
	}
	remover.Close()
	b := <-done
	if b.err != nil {
		t.Fatal(b.err)
	}
	defer b.lock.Close()
	if b.dir != dir || !exists(t, filepath.Join(dir, "passwd")) {
		t.Fatalf("built %q, want a new %q with its files", b.dir, dir)
	}
	if !namesFile(dir, b.lock) {
		t.Fatal("the lock is not on the new copy")
	}
}

// TestRuntimeEtcCopies: a runtime removes at start the /etc copies that no
// runtime uses, shares its own with the runtimes that use the same, and the
// last of them to close leaves it for the next runtime, which binds it as it
// is: two runtimes that come and go leave their state directory with that
// one copy, and no lock behind; a third takes the same copy, not a new one.
func TestRuntimeEtcCopies(t *testing.T) {
	testenv.RequireSandbox(t)
	state := stateDir(t)
	// A copy of an /etc that has changed since, and a half-built one.
	for _, d := range []string{"etc-0123456789abcdef", etcTmpPrefix + "dead"} {
		if err := os.MkdirAll(filepath.Join(state, d, "ssl"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	open := func() *Runtime {
		t.Helper()
		rt, err := NewRuntime(Config{Capacity: 1, StateDir: state})
		if err != nil {
			t.Fatalf("NewRuntime: %v", err)
		}
		t.Cleanup(func() { rt.Close() })
		return rt
	}
	closeRT := func(rt *Runtime) {
		t.Helper()
		if err := rt.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if lock := filepath.Join(runtimeLockDir, rt.name+".lock"); exists(t, lock) {
			t.Errorf("%s left after Close", lock)
		}
	}
	a := open()
	names := func() []string {
		t.Helper()
		entries, err := os.ReadDir(state)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), initCopyPrefix) { // the init binary's shared copy: see TestInstallInit
				out = append(out, e.Name())
			}
		}
		return out
	}
	if got, want := names(), []string{filepath.Base(a.etcDir), a.name}; !slices.Equal(got, want) {
		t.Fatalf("state dir after the first start: %v, want %v (the copies no one uses removed)", got, want)
	}
	b := open()
	if b.etcDir != a.etcDir {
		t.Fatalf("second runtime's /etc %s, want the shared %s", b.etcDir, a.etcDir)
	}
	closeRT(a)
	if !exists(t, filepath.Join(b.etcDir, "passwd")) {
		t.Fatalf("%s removed while the second runtime uses it", b.etcDir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	info, err := b.Create(ctx, Options{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if out := shOK(t, b, info.ID, "cat /etc/hosts"); !strings.Contains(out, "localhost") {
		t.Fatalf("a sandbox of the second runtime reads /etc/hosts: %q", out)
	}
	kept, err := os.Lstat(b.etcDir)
	if err != nil {
		t.Fatal(err)
	}
	closeRT(b)
	if got, want := names(), []string{filepath.Base(b.etcDir)}; !slices.Equal(got, want) {
		t.Fatalf("state dir after both closed: %v, want %v (the copy of this /etc, for the next runtime)", got, want)
	}
	c := open()
	if again, err := os.Lstat(c.etcDir); err != nil || !os.SameFile(kept, again) {
		t.Fatalf("third runtime's /etc %s (%v), want the kept %s itself", c.etcDir, err, b.etcDir)
	}
	closeRT(c)
}

// TestRemoveUnusedEtcSparesUndeclared: while a live runtime of an earlier
// build (its lock in its directory, no etc link) is in the state dir, no
// copy is removed: it binds its copy without holding it.
func TestRemoveUnusedEtcSparesUndeclared(t *testing.T) {
	host, state := writeHostEtc(t), t.TempDir()
	dir, lock, err := buildEtc(state, host, etcBinds(host))
	if err != nil {
		t.Fatal(err)
	}
	lock.Close()
	old := filepath.Join(state, "rt-0123456789abcdef0123")
	if err := os.Mkdir(old, 0o755); err != nil {
		t.Fatal(err)
	}
	held, err := lockFile(filepath.Join(old, "lock"))
	if err != nil || held == nil {
		t.Fatalf("lock: %v", err)
	}
	if err := removeUnusedEtc(state, "", ""); err != nil || !exists(t, dir) {
		t.Fatalf("%s removed (%v) while an undeclared runtime lives", dir, err)
	}
	held.Close()
	if err := removeUnusedEtc(state, "", ""); err != nil || exists(t, dir) {
		t.Fatalf("%s left (%v) once the undeclared runtime ended", dir, err)
	}
}

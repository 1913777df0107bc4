// Package testenv decides whether a test that needs a real component (root,
// bubblewrap, cgroups, PostgreSQL, Chromium) can run on this machine, and
// makes what such tests need beside it (a TLS certificate).
//
// Run by hand without the component, such a test skips and says why. When the
// CI environment variable is set, a missing component is a failure instead: CI
// must never report green for a test that did not run.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// PostgresEnv names the environment variable that holds the PostgreSQL DSN
// used by tests (for example postgres://root@127.0.0.1:5432/test?sslmode=disable).
const PostgresEnv = "AGENTSANDBOX_TEST_POSTGRES"

// InCI reports whether the CI environment variable is set (to anything).
func InCI() bool { return os.Getenv("CI") != "" }

// Missing skips tb with reason, or fails it when running in CI.
func Missing(tb testing.TB, reason string) {
	tb.Helper()
	if InCI() {
		tb.Fatalf("CI is set, so this test must run, but: %s", reason)
		return
	}
	tb.Skipf("skipping: %s (set up the component, or run `make test` as root)", reason)
}

// RequireRoot skips or fails (see Missing) unless the test runs as root.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		Missing(tb, "needs root (sandboxes switch to a per-slot host uid and create cgroups)")
	}
}

// RequireBinary returns the path of the named program, or skips or fails
// (see Missing) with hint when it is not installed.
func RequireBinary(tb testing.TB, name, hint string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(tb, name+" is not installed: "+hint)
	}
	return p
}

// RequireBwrap returns the path of bubblewrap, or skips or fails (see Missing).
func RequireBwrap(tb testing.TB) string {
	tb.Helper()
	return RequireBinary(tb, "bwrap", "apt-get install -y bubblewrap")
}

// RequireCgroups skips or fails (see Missing) unless a cgroup hierarchy with
// the memory and pids controllers is mounted (v2 unified, or v1 controllers).
func RequireCgroups(tb testing.TB) {
	tb.Helper()
	for _, p := range []string{"/sys/fs/cgroup/cgroup.controllers", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if _, err := os.Stat(p); err == nil {
			return
		}
	}
	Missing(tb, "no cgroup v2 or v1 memory hierarchy is mounted under /sys/fs/cgroup")
}

// RequireSandbox combines RequireRoot, RequireBwrap and RequireCgroups and
// returns the bubblewrap path.
func RequireSandbox(tb testing.TB) string {
	tb.Helper()
	RequireRoot(tb)
	RequireCgroups(tb)
	return RequireBwrap(tb)
}

// PostgresDSN returns the DSN from PostgresEnv, or skips or fails (see Missing).
func PostgresDSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(PostgresEnv)
	if dsn == "" {
		Missing(tb, PostgresEnv+" is not set (e.g. postgres://root@127.0.0.1:5432/test?sslmode=disable)")
	}
	return dsn
}

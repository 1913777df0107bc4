package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"openvibe.network/agentsandbox/internal/testenv"
)

// TestLean guards the point of this command: it links the sandbox runtime,
// the in-sandbox init and what they need, and nothing of the worker (no
// API, proxy, metrics, check-in or schema engine). internal/brokerca is
// the runtime's: it makes a sandbox's CA and trust bundle when the sandbox
// has secrets; internal/cdp (the standard library only) is how the runtime
// asks a pooled browser whether it answers.
func TestLean(t *testing.T) {
	testenv.OnlyDeps(t, []string{
		"openvibe.network/agentsandbox", "openvibe.network/agentsandbox/cmd/codes-sandbox",
		"openvibe.network/agentsandbox/sandbox", "openvibe.network/agentsandbox/sandbox/",
		"openvibe.network/agentsandbox/inside/capexec", "openvibe.network/agentsandbox/internal/runcmd",
		"openvibe.network/agentsandbox/internal/sibling", "openvibe.network/agentsandbox/internal/cli",
		"openvibe.network/agentsandbox/internal/mountinfo", "openvibe.network/agentsandbox/internal/osthread",
		"openvibe.network/agentsandbox/internal/unixsock", "openvibe.network/agentsandbox/internal/brokerca",
		"openvibe.network/agentsandbox/internal/cdp",
		"golang.org/x/sys/", "golang.org/x/net/bpf",
	}, "which `run` does not need (it belongs in codes-sandbox-worker)")
}

// TestBecomesWorker builds this program and the worker side by side and
// checks that every command but run reaches the worker, and that a worker
// that is missing or writable by others is refused with what to do.
func TestBecomesWorker(t *testing.T) {
	goBin := testenv.RequireBinary(t, "go", "install Go (make deps)")
	dir := t.TempDir()
	if out, err := exec.Command(goBin, "build", "-o", dir+"/", ".", "../codes-sandbox-worker").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	front, worker := filepath.Join(dir, "codes-sandbox"), filepath.Join(dir, workerName)
	run := func(bin string, args ...string) (code int, stdout, stderr string) {
		var out, errb bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		_ = cmd.Run()
		return cmd.ProcessState.ExitCode(), out.String(), errb.String()
	}
	_, want, _ := run(worker, "--version")
	if code, got, _ := run(front, "--version"); code != 0 || got != want || want == "" {
		t.Errorf("codes-sandbox --version: exit %d, %q; want 0 and the worker's %q", code, got, want)
	}
	for _, args := range [][]string{{"serve", "--help"}, {"help"}} {
		if code, out, _ := run(front, args...); code != 0 || !strings.Contains(out, "usage: codes-sandbox") || !strings.Contains(out, "serve") {
			t.Errorf("codes-sandbox %v: exit %d, stdout %q; want the worker's usage", args, code, out)
		}
	}
	if code, out, _ := run(front, "run", "--help"); code != 0 || !strings.Contains(out, "usage: codes-sandbox run") {
		t.Errorf("codes-sandbox run --help: exit %d, stdout %q", code, out)
	}
	// The worker checks that the program that started it is of its build.
	cmd := exec.Command(worker, "--version")
	cmd.Env = append(os.Environ(), "AGENTSANDBOX_CALLER_BUILD=go\tgo1.0\n")
	if out, err := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != 125 || !strings.Contains(string(out), "from another build (Go go1.0") {
		t.Errorf("the worker started by another build: %v, %q; want exit 125 and the difference", err, out)
	}
	if err := os.Chmod(worker, 0o777); err != nil {
		t.Fatal(err)
	}
	if code, _, errb := run(front, "serve", "--help"); code != 125 || !strings.Contains(errb, "writable by others") {
		t.Errorf("with a worker writable by others: exit %d, stderr %q; want 125 and the reason", code, errb)
	}
	if err := os.Remove(worker); err != nil {
		t.Fatal(err)
	}
	if code, _, errb := run(front, "serve"); code != 125 || !strings.Contains(errb, "install "+workerName+" next to this program") {
		t.Errorf("without the worker: exit %d, stderr %q; want 125 and what to install", code, errb)
	}
	if code, out, _ := run(front, "run", "--help"); code != 0 || !strings.Contains(out, "usage: codes-sandbox run") {
		t.Errorf("codes-sandbox run --help without the worker: exit %d, stdout %q; want run's usage", code, out)
	}
}

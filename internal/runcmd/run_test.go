package runcmd

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox/inside"
	"openvibe.network/agentsandbox/internal/testenv"
)

// TestMain lets this test binary serve as the sandbox init, as
// cmd/codes-sandbox's main does, and as that program's run.
func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) != "" {
		os.Exit(Main(os.Args[2:])) // the program itself, as TestRunSignalled starts it
	}
	if code, ok := inside.MaybeRun(inside.Hooks{}); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// asMainEnv makes this test binary run the program's run (Main).
const asMainEnv = "CODES_SANDBOX_TEST_AS_MAIN"

// TestRunSignalled runs the program itself, `codes-sandbox run`, and sends
// it SIGINT (Ctrl-C) once its command runs: it exits 130, saying that the
// sandbox was killed and wiped, and the command is gone.
func TestRunSignalled(t *testing.T) {
	testenv.RequireSandbox(t)
	marker := fmt.Sprintf("62.%09d", time.Now().Nanosecond()) // a unique sleep duration
	cmd := exec.Command(os.Args[0], "run", "--", "sh", "-c", "echo started; exec sleep "+marker)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "started\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("first line %q (%v), stderr %q", line, err, errb.String())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if cmd.ProcessState.ExitCode() != 130 || !strings.Contains(errb.String(), "interrupted; the sandbox was killed and wiped") {
		t.Fatalf("exit %v, stderr %q; want 130 and the sandbox wiped", err, errb.String())
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, _ := os.ReadFile(p); strings.Contains(string(b), marker) {
			t.Fatalf("the interrupted command survived: %s %q", p, b)
		}
	}
}

// cancelOn cancels once what was written contains want.
type cancelOn struct {
	buf    bytes.Buffer
	want   string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.want) {
		c.cancel()
	}
	return len(p), nil
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantStdout string
		wantStderr string // a substring
		sandbox    bool
	}{
		{name: "ExitCode", args: []string{"--", "sh", "-c", "echo out; echo err >&2; exit 3"}, wantCode: 3, wantStdout: "out\n", wantStderr: "err", sandbox: true},
		{name: "Stdin", args: []string{"--", "tr", "a-z", "A-Z"}, stdin: "hello", wantStdout: "HELLO", sandbox: true},
		{name: "Env", args: []string{"--env", "GREETING=hi", "--", "sh", "-c", "echo $GREETING $HOME"}, wantStdout: "hi /workspace\n", sandbox: true},
		{name: "TimeBox", args: []string{"--time-box", "1s", "--", "sleep", "60"}, wantCode: 137, wantStderr: "the time box (1s) ended the command", sandbox: true},
		{name: "Memory", args: []string{"--memory-mb", "64", "--", "python3", "-c", "x = b'a' * (512 << 20)"}, wantCode: 137, wantStderr: "the memory limit (64 MB) killed the command", sandbox: true},
		{name: "Pids", args: []string{"--pids", "16", "--", "sh", "-c", "i=0; while [ $i -lt 50 ]; do sleep 30 & i=$((i+1)); done; wait"}, wantCode: 2, wantStderr: "the process limit (16 pids) was reached", sandbox: true},
		{name: "Disk", args: []string{"--disk-mb", "4", "--", "dd", "if=/dev/zero", "of=/workspace/f", "bs=1M", "count=8"}, wantCode: 1, wantStderr: "No space left on device", sandbox: true},
		{name: "ErrNoCommand", args: []string{"--memory-mb", "64"}, wantCode: 2, wantStderr: "no command given"},
		{name: "ErrEmptyCommand", args: []string{"--", ""}, wantCode: 2, wantStderr: "no command given"},
		{name: "CommandNotFound", args: []string{"--", "nosuchcommand", "x"}, wantCode: 127, sandbox: true,
			wantStderr: "codes-sandbox run: nosuchcommand: command not found (looked for in the sandbox's PATH, /usr/local/sbin:"},
		{name: "FileNotFound", args: []string{"--", "/usr/bin/nosuchcommand"}, wantCode: 127, sandbox: true,
			wantStderr: "codes-sandbox run: /usr/bin/nosuchcommand: command not found (no such file in the sandbox)"},
		{name: "ErrBadEnv", args: []string{"--env", "NOEQUALS", "--", "true"}, wantCode: 2, wantStderr: "want K=V"},
		{name: "ErrTimeBox", args: []string{"--time-box", "1h", "--", "true"}, wantCode: 2, wantStderr: "--time-box is 1h0m0s; give 1s to 30m0s"},
		{name: "ErrTimeBoxZero", args: []string{"--time-box", "0", "--", "true"}, wantCode: 2, wantStderr: "--time-box is 0s; give 1s to 30m0s"},
		{name: "ErrMemoryZero", args: []string{"--memory-mb", "0", "--", "true"}, wantCode: 2, wantStderr: "--memory-mb is 0; give at least 16"},
		{name: "ErrCPUNegative", args: []string{"--cpu-percent", "-5", "--", "true"}, wantCode: 2, wantStderr: "--cpu-percent is -5; give at least 1"},
		{name: "ErrEnvName", args: []string{"--env", "1X=2", "--", "true"}, wantCode: 2, wantStderr: `"1X" is not a valid variable name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sandbox {
				testenv.RequireSandbox(t)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var out, errb bytes.Buffer
			code := Run(ctx, tc.args, strings.NewReader(tc.stdin), &out, &errb)
			if code != tc.wantCode || out.String() != tc.wantStdout || !strings.Contains(errb.String(), tc.wantStderr) {
				t.Fatalf("exit %d stdout %q stderr %q; want %d %q %q", code, out.String(), errb.String(), tc.wantCode, tc.wantStdout, tc.wantStderr)
			}
			assertNoSandboxLeft(t, &errb)
		})
	}
}

// TestRunInterrupted cancels a run (as Ctrl-C does) and checks that it
// exits 130 and that the sandbox's command is gone.
func TestRunInterrupted(t *testing.T) {
	testenv.RequireSandbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := &cancelOn{want: "started", cancel: cancel}
	var errb bytes.Buffer
	marker := fmt.Sprintf("61.%09d", time.Now().Nanosecond()) // a unique sleep duration
	code := Run(ctx, []string{"--", "sh", "-c", "echo started; exec sleep " + marker}, strings.NewReader(""), out, &errb)
	if code != 130 || !strings.Contains(errb.String(), "interrupted; the sandbox was killed and wiped") {
		t.Fatalf("exit %d stderr %q", code, errb.String())
	}
	assertNoSandboxLeft(t, &errb)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, _ := os.ReadFile(p); strings.Contains(string(b), marker) {
			t.Fatalf("the interrupted command survived: %s %q", p, b)
		}
	}
}

// assertNoSandboxLeft fails when the run reported a wipe it could not verify.
func assertNoSandboxLeft(t *testing.T, stderr *bytes.Buffer) {
	t.Helper()
	if s := stderr.String(); strings.Contains(s, "verified") {
		t.Fatalf("the wipe was not verified: %s", s)
	}
}

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
)

// forger is a background process that waits for a process whose command
// line holds "marker42" (built at run time, so the forger's own command line
// does not hold it), then tries to write into its stdout and to open its
// memory, and records what it could do in /workspace/tried.
const forger = `m=mark; m=${m}er42
for i in $(seq 2000); do
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[ "$p" = $$ ] && continue
		if tr '\0' ' ' <$d/cmdline 2>/dev/null | grep -q "$m"; then
			r=""
			if echo "==== 42 passed (FORGED) ====" 2>/dev/null >$d/fd/1; then r="fd1:written"; else r="fd1:refused"; fi
			if (exec 3<>$d/mem) 2>/dev/null; then r="$r mem:opened"; else r="$r mem:refused"; fi
			if cat $d/environ >/dev/null 2>&1; then r="$r environ:read"; else r="$r environ:refused"; fi
			echo "$r" >/workspace/tried.tmp && mv /workspace/tried.tmp /workspace/tried
			exit 0
		fi
	done
	sleep 0.01
done`

// TestExecIsolation (finding 8 of issue 28): a process an earlier command
// left running cannot reach a later command's processes: it cannot write
// into their stdout (/proc/PID/fd/1), open their memory or read their
// environment, so the later command's result is its own.
func TestExecIsolation(t *testing.T) {
	for _, v := range views() {
		t.Run(v.name, func(t *testing.T) { testExecIsolation(t, v) })
	}
}

func testExecIsolation(t *testing.T, v view) {
	rt := v.runtime(t, Config{Capacity: 1})
	id := newBox(t, rt, v.options(t, Options{})).ID
	ctx := context.Background()
	if _, err := rt.Start(ctx, id, agentsandbox.ExecRequest{Argv: []string{"sh", "-c", forger}}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	// The later command waits until the forger has tried, then prints its
	// own result.
	r := run(t, rt, id, agentsandbox.ExecRequest{Argv: []string{"sh", "-c",
		`while [ ! -e /workspace/tried ]; do sleep 0.01; done; echo "FAILED 3 tests"; exit 1`, "marker42"}})
	tried := strings.TrimSpace(shOK(t, rt, id, "cat /workspace/tried"))
	if r.stdout != "FAILED 3 tests\n" || r.ExitCode != 1 {
		t.Errorf("the later command's result: exit %d, stdout %q (the forger: %s)", r.ExitCode, r.stdout, tried)
	}
	if want := "fd1:refused mem:refused environ:refused"; tried != want {
		t.Errorf("the forger: %q, want %q", tried, want)
	}
}

// TestExecTimeoutKillsOrphans (finding 11 of issue 28): a double fork with
// setsid leaves a process that is neither the command's descendant by its
// parent (which exited) nor in its session: the timeout ends it all the
// same.
func TestExecTimeoutKillsOrphans(t *testing.T) {
	for _, v := range views() {
		t.Run(v.name, func(t *testing.T) { testExecTimeoutKillsOrphans(t, v) })
	}
}

func testExecTimeoutKillsOrphans(t *testing.T, v view) {
	rt := v.runtime(t, Config{Capacity: 1})
	id := newBox(t, rt, v.options(t, Options{})).ID
	r := run(t, rt, id, agentsandbox.ExecRequest{Argv: []string{"sh", "-c",
		`(setsid sh -c "sleep 1001" &) ; (perl -e 'fork and exit; setpgrp; exec "sleep", "1002"' &) ; sleep 1000`},
		Timeout: 500 * time.Millisecond})
	if r.Reason != agentsandbox.ReasonTimeout {
		t.Fatalf("result %+v, want the timeout", r.ExecResult)
	}
	const sleeps = "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -o 'sleep 100[0-2]' | wc -l"
	if out := shOK(t, rt, id, sleeps); strings.TrimSpace(out) != "0" {
		t.Fatalf("processes of the timed-out exec still run: %q", out)
	}
}

// TestPrlimitOtherRefused (finding 9 of issue 28): a process of the sandbox
// cannot lower the init's limits (which stalled every later request), while
// it may still set its own.
func TestPrlimitOtherRefused(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	id := newBox(t, rt, Options{}).ID
	r := sh(t, rt, id, `prlimit --pid 1 --nofile=6:6 && echo set-init; prlimit --nofile=64:64 sh -c 'ulimit -n'; grep 'Max open files' /proc/1/limits | tr -s ' ' | sed 's/ *$//'`)
	limit := fmt.Sprintf("Max open files %d %d files\n", rt.cfg.MaxOpenFiles, rt.cfg.MaxOpenFiles)
	if want := "64\n" + limit; r.stdout != want {
		t.Fatalf("stdout %q (stderr %q), want %q", r.stdout, r.stderr, want)
	}
	if out := shOK(t, rt, id, "echo still-answers"); out != "still-answers\n" {
		t.Fatalf("after the attempt: %q", out)
	}
}

// TestStalledInitBroken (finding 9 of issue 28): a call to an init that
// stopped answering (here stopped from the host) fails with ErrBroken
// instead of waiting for it, the sandbox is listed broken, later calls fail
// at once, and Delete still wipes it. A command that is silent longer than
// the control timeout is not taken for a stall: its init answers pings.
func TestStalledInitBroken(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1, ControlTimeout: 2 * time.Second})
	id := newBox(t, rt, Options{}).ID
	if out := shOK(t, rt, id, "sleep 5; echo quiet"); out != "quiet\n" {
		t.Fatalf("a silent command: %q", out)
	}
	b := mustBox(t, rt, id)
	if err := syscall.Kill(b.initPid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out bytes.Buffer
	if _, err := rt.Exec(ctx, id, agentsandbox.ExecRequest{Argv: []string{"true"}}, &out, &out); !errors.Is(err, ErrBroken) {
		t.Fatalf("Exec on a stopped init: %v, want ErrBroken", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Exec returned only when the test's context ended")
	}
	if l := rt.List(); len(l) != 1 || !l[0].Broken {
		t.Fatalf("List: %+v, want the sandbox broken", l)
	}
	if _, err := rt.Processes(ctx, id); !errors.Is(err, ErrBroken) {
		t.Fatalf("Processes: %v, want ErrBroken", err)
	}
	if err := rt.PutFile(ctx, id, "f", strings.NewReader("x"), 0o644); !errors.Is(err, ErrBroken) {
		t.Fatalf("PutFile: %v, want ErrBroken", err)
	}
	if _, err := rt.DialPort(ctx, id, 8000); !errors.Is(err, ErrBroken) {
		t.Fatalf("DialPort: %v, want ErrBroken", err)
	}
	if _, err := rt.Usage(id); err != nil {
		t.Fatalf("Usage of a broken sandbox: %v", err)
	}
	// newBox's clean-up deletes it and checks the wipe.
}

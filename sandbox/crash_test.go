package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/syncbuf"
	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/sandbox/cgroup"
)

// crashHelperEnv makes the test binary a worker that is about to be killed:
// it opens a runtime in the state directory the variable names, creates a
// sandbox that writes 100 MB into its workspace, prints what it made and
// waits to be killed.
const crashHelperEnv = "SANDBOX_TEST_CRASH_HELPER"

func crashHelper(stateDir string) int {
	rt, err := NewRuntime(Config{Capacity: 1, StateDir: stateDir})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	info, err := rt.Create(context.Background(), Options{})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	var out strings.Builder
	if _, err := rt.Exec(context.Background(), info.ID, agentsandbox.ExecRequest{
		Argv: []string{"sh", "-c", "dd if=/dev/zero of=/workspace/big bs=1M count=100 2>/dev/null; sleep 300 & echo written"},
	}, &out, nil); err != nil || out.String() != "written\n" {
		fmt.Println("error", err, out.String())
		return 1
	}
	fmt.Println("ready", rt.name, info.HostUID, rt.boxPath(info.ID))
	select {}
}

// TestCrashLeavesNothing: a worker killed with SIGKILL while its sandbox
// runs, and a new runtime started at once after it (no waiting for an age),
// leave nothing of the dead one behind: no mount, no cgroup, no process of
// its uid, no directory, no lock; also when the new runtime has another
// state directory (it finds the dead one's where its lock says).
func TestCrashLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sameState bool
	}{{"SameStateDir", true}, {"OtherStateDir", false}} {
		t.Run(tc.name, func(t *testing.T) {
			testenv.RequireSandbox(t)
			state := stateDir(t)
			next := state
			if !tc.sameState {
				next = stateDir(t)
			}
			crashAndRestart(t, state, next)
		})
	}
}

// crashAndRestart kills a worker with a running sandbox in state, starts a
// runtime in next and checks that nothing of the dead one is left.
func crashAndRestart(t *testing.T, state, next string) {
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), crashHelperEnv+"="+state)
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	helper.Stderr = os.Stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready ") {
		_ = helper.Process.Kill()
		t.Fatalf("helper: %q %v", line, err)
	}
	var name, boxDir string
	var uid int
	if _, err := fmt.Sscanf(line, "ready %s %d %s", &name, &uid, &boxDir); err != nil {
		t.Fatal(err)
	}
	if mounts, _ := mountsUnder(boxDir); len(mounts) != 2 {
		t.Fatalf("the helper's sandbox has mounts %v, want its tmpfs and devpts", mounts)
	}
	_ = helper.Process.Signal(syscall.SIGKILL)
	_ = helper.Wait()

	newRuntime(t, Config{Capacity: 1, StateDir: next})
	if mounts, err := mountsUnder(filepath.Join(state, name)); err != nil || len(mounts) > 0 {
		t.Errorf("mounts of the dead runtime left: %v %v", mounts, err)
	}
	for _, p := range []string{filepath.Join(state, name), filepath.Join(runtimeLockDir, name+".lock")} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left (%v)", p, err)
		}
	}
	base, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range base.ParentDirs() {
		if _, err := os.Stat(filepath.Join(d, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("cgroup %s left (%v)", filepath.Join(d, name), err)
		}
	}
	// The kernel may take a moment to reap what the cgroup kill ended.
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids, err := uidProcesses(uid)
		if err == nil && len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the dead runtime's uid %d left: %v %v", uid, pids, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStaleKeepsLiveRuntimes: cleaning up never touches a live runtime's
// directory or cgroups, whatever its state directory, and does not log it
// as removed.
func TestStaleKeepsLiveRuntimes(t *testing.T) {
	live := newRuntime(t, Config{Capacity: 1})
	info := newBox(t, live, Options{})
	var logs syncbuf.Buffer
	newRuntime(t, Config{Capacity: 1, StateDir: stateDir(t), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if out := shOK(t, live, info.ID, "echo alive"); out != "alive\n" {
		t.Fatalf("the live runtime's sandbox: %q", out)
	}
	if _, err := os.Stat(live.dir); err != nil {
		t.Fatalf("the live runtime's directory: %v", err)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"runtime":"`+live.name+`"`) {
			t.Errorf("the new runtime logged about the live one: %s", line)
		}
	}
}

// stateDir returns a state directory of the test's own (root-owned, 0755,
// under /run like the default), removed at the end of the test.
func stateDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("/run", "codes-sandbox-test-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// TestInitDeathLogged: a sandbox whose init dies is ended and wiped, and
// the runtime's log says so with the sandbox, the reason and what
// bubblewrap last wrote.
func TestInitDeathLogged(t *testing.T) {
	var logs syncbuf.Buffer
	rt := newRuntime(t, Config{Capacity: 1, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	info := newBox(t, rt, Options{})
	if err := syscall.Kill(mustBox(t, rt, info.ID).initPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(testTimeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, line := range strings.Split(logs.String(), "\n") {
			var rec struct{ Msg, Sandbox, Reason, Exit string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "sandbox ended on its own" {
				if rec.Sandbox != info.ID || rec.Reason != "exited" || rec.Exit == "" {
					t.Fatalf("log line %s", line)
				}
				if _, err := rt.get(info.ID); !errors.Is(err, ErrNotFound) {
					t.Fatalf("the sandbox is still there after its init died: %v", err)
				}
				return
			}
		}
	}
	t.Fatalf("no log line says the sandbox ended on its own:\n%s", logs.String())
}

// Package vmtest runs commands in a real Linux guest: Debian's kernel under
// qemu with software emulation, a cgroup-v2-only hierarchy, no network
// device, the host's /usr and /etc shared read-only. It drives
// scripts/vm/run.sh, which does the booting (see that script and
// docs/hosts.md).
//
// A test builds the binaries it needs on the host into a share directory
// (Build), then boots one guest that runs a list of commands in order (Run)
// and gets each one's exit code and output back. Require skips the test
// when qemu or the other guest tools are missing, or fails it when the CI
// environment variable is set (see internal/testenv).
package vmtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/testenv"
)

// GuestShare is where the guest mounts the share directory, and GuestBin
// where it copies the share's bin/ before the first command (a tmpfs:
// executables run from the 9p share would be read over 9p page by page).
// Commands run in GuestBin, with it first on PATH and in $VMTEST_BIN.
const (
	GuestShare = "/share"
	GuestBin   = "/tmp/vmtest/bin"
)

// DefaultCommandTimeout bounds a Command whose Timeout is zero.
const DefaultCommandTimeout = 10 * time.Minute

// Command is one command to run in the guest, as root.
type Command struct {
	// Name names the command in results and logs: letters, digits, '-',
	// '_' and '.' only, unique within a Run.
	Name string
	// Argv is the command; Argv[0] is looked up on PATH, which starts
	// with GuestBin.
	Argv []string
	// Env is added to the guest's environment (KEY=VALUE).
	Env []string
	// Timeout bounds the command inside the guest (DefaultCommandTimeout
	// when zero); at its end the command gets SIGQUIT (a Go program prints
	// its goroutines), then SIGKILL 30 s later, and exits 124.
	Timeout time.Duration
}

// Result is what one Command did in the guest.
type Result struct {
	Name string
	// ExitCode is the command's exit code; 124 when its Timeout ended it;
	// -1 when the guest stopped before it ended (Run then also errs).
	ExitCode int
	// Output is its stdout and stderr, interleaved as written.
	Output string
	// Duration is its wall time, measured in the guest.
	Duration time.Duration
}

// Config says how to boot the guest. The zero value boots the plain mode
// with run.sh's defaults (2 CPUs, 3 GiB).
type Config struct {
	// Root is the repository's root (the directory of go.mod); Root()
	// finds it from the working directory when empty.
	Root string
	// Systemd boots the guest with systemd as PID 1 instead of a plain
	// shell; the commands then run from a oneshot unit once basic.target
	// is up.
	Systemd bool
	// Timeout is the hard bound of the whole boot: run.sh kills qemu at
	// its end. Zero means the sum of the commands' timeouts plus 5 minutes.
	Timeout time.Duration
	// CPUs and MemoryMB size the guest; zero keeps run.sh's defaults.
	CPUs, MemoryMB int
}

// Report is the outcome of one boot.
type Report struct {
	// Results holds one Result per Command that ran, in order (with Run's
	// error, the last may be one that did not finish).
	Results []Result
	// Boot is the guest's uptime when its first command started: the
	// kernel's start up to a ready userspace (qemu's own start excluded).
	Boot time.Duration
	// Wall is the host's wall time of the whole run, qemu start to stop.
	Wall time.Duration
	// Log is run.sh's own output: its progress lines and, on failure, the
	// tail of the serial console.
	Log string
	// ConsoleLog is the path of the guest's serial console log (in the
	// share directory).
	ConsoleLog string
}

// Result returns the result of the command called name, or false.
func (r *Report) Result(name string) (Result, bool) {
	for _, res := range r.Results {
		if res.Name == name {
			return res, true
		}
	}
	return Result{}, false
}

// Root returns the repository's root: the nearest directory at or above the
// working directory that holds go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("vmtest: working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("vmtest: no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// Require skips tb, or fails it when CI is set (see testenv.Missing), unless
// this host can boot the guest: qemu-system-x86_64, a static busybox, and a
// kernel that is cached or can be fetched with apt-get and dpkg-deb.
func Require(tb testing.TB) {
	tb.Helper()
	if reason := missing(); reason != "" {
		testenv.Missing(tb, reason+" (scripts/vm/deps.sh installs what the guest needs)")
	}
}

// missing returns why the guest cannot boot here, or "".
func missing() string {
	for _, c := range []string{"qemu-system-x86_64", "setpriv"} {
		if _, err := exec.LookPath(c); err != nil {
			return c + " is not installed"
		}
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		return "/bin/busybox is missing (busybox-static)"
	}
	for _, c := range []string{"apt-get", "apt-cache", "dpkg-deb"} {
		if _, err := exec.LookPath(c); err != nil {
			return c + " is not installed (needed to fetch Debian's kernel)"
		}
	}
	return ""
}

// Build writes into dir/bin the test binary of each package of tests (named
// after the package's last element: ./sandbox/cgroup gives cgroup.test) and
// the commands of cmds (patterns such as ./cmd/...) as they ship, built by
// root's scripts/gobuild.sh, so that the guest's starts are an installed
// worker's. Package
// paths are relative to root. The binaries are built for the host, which is
// the guest's architecture.
func Build(ctx context.Context, root, dir string, tests, cmds []string) error {
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return fmt.Errorf("vmtest: %w", err)
	}
	seen := map[string]string{}
	for _, pkg := range tests {
		name := filepath.Base(pkg) + ".test"
		if prev, ok := seen[name]; ok {
			return fmt.Errorf("vmtest: %s and %s would both build %s", prev, pkg, name)
		}
		seen[name] = pkg
		if err := runIn(ctx, root, "go", "test", "-c", "-o", filepath.Join(bin, name), pkg); err != nil {
			return err
		}
	}
	if len(cmds) > 0 {
		if err := runIn(ctx, root, filepath.Join(root, "scripts", "gobuild.sh"), append([]string{bin}, cmds...)...); err != nil {
			return err
		}
	}
	return nil
}

// runIn runs name (the go command, or a script of root's) in root and wraps
// its output into the error.
func runIn(ctx context.Context, root, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("vmtest: %s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// Run boots one guest with dir as its share (dir/bin as Build left it),
// runs cmds in order in it, and returns what each did. A command that fails
// does not stop the next one. The error is about the harness only (the
// guest did not boot, or gave no result for a command): the Report still
// carries the log to show. ctx's end stops the guest.
func Run(ctx context.Context, cfg Config, dir string, cmds []Command) (*Report, error) {
	root := cfg.Root
	if root == "" {
		var err error
		if root, err = Root(); err != nil {
			return nil, err
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("vmtest: share: %w", err)
	}
	if err := writeDriver(dir, cmds); err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
		for _, c := range cmds {
			timeout += commandTimeout(c)
		}
	}
	args := []string{"--share", dir, "--timeout", strconv.Itoa(int(timeout.Seconds()))}
	if cfg.Systemd {
		args = append(args, "--systemd")
	}
	if cfg.CPUs > 0 {
		args = append(args, "--cpus", strconv.Itoa(cfg.CPUs))
	}
	if cfg.MemoryMB > 0 {
		args = append(args, "--memory", strconv.Itoa(cfg.MemoryMB))
	}
	args = append(args, "--", "/bin/bash", GuestShare+"/vmtest/driver.sh")

	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "vm", "run.sh"), args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) } // run.sh's trap stops qemu
	cmd.WaitDelay = 30 * time.Second
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	start := time.Now()
	runErr := cmd.Run()
	rep := &Report{Wall: time.Since(start), Log: log.String(), ConsoleLog: filepath.Join(dir, ".vm", "console.log")}
	if b, err := os.ReadFile(filepath.Join(dir, ".vm", "started")); err == nil {
		if s, err := strconv.ParseFloat(strings.Fields(string(b) + " 0")[0], 64); err == nil {
			rep.Boot = time.Duration(s * float64(time.Second))
		}
	}
	for i, c := range cmds {
		res, err := readResult(dir, i, c.Name)
		if err != nil {
			if out, oerr := os.ReadFile(filepath.Join(dir, "vmtest", strconv.Itoa(i)+".out")); oerr == nil {
				// It started but did not finish: keep what it printed.
				rep.Results = append(rep.Results, Result{Name: c.Name, ExitCode: -1, Output: string(out)})
			}
			return rep, fmt.Errorf("vmtest: no result for %s (run.sh: %v): %w", c.Name, runErr, err)
		}
		rep.Results = append(rep.Results, res)
	}
	if runErr != nil {
		return rep, fmt.Errorf("vmtest: run.sh: %w", runErr)
	}
	return rep, nil
}

// commandTimeout is c's timeout with its default.
func commandTimeout(c Command) time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultCommandTimeout
}

// readResult reads the exit code, output and duration the driver left for
// command i.
func readResult(dir string, i int, name string) (Result, error) {
	base := filepath.Join(dir, "vmtest", strconv.Itoa(i))
	code, err := os.ReadFile(base + ".code")
	if err != nil {
		return Result{}, err
	}
	res := Result{Name: name}
	if res.ExitCode, err = strconv.Atoi(strings.TrimSpace(string(code))); err != nil {
		return Result{}, fmt.Errorf("exit code %q: %w", code, err)
	}
	out, err := os.ReadFile(base + ".out")
	if err != nil {
		return Result{}, err
	}
	res.Output = string(out)
	if ms, err := os.ReadFile(base + ".ms"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(ms))); err == nil {
			res.Duration = time.Duration(n) * time.Millisecond
		}
	}
	return res, nil
}

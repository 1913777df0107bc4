package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox/control"
)

// directWaitDelay bounds how long a one-command sandbox's Run waits for its
// standard streams after bubblewrap exited (a background child may hold
// them open).
const directWaitDelay = time.Second

// exitStatus maps a process state to a shell-style exit code (128+signal).
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return 255
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		return control.ExitCode(ws)
	}
	return ps.ExitCode()
}

// directRun is the command and standard streams of a one-command sandbox.
type directRun struct {
	argv   []string
	first  firstProcess
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// Run runs argv as the only command of a fresh sandbox with opts, without
// an init: stdin, stdout and stderr are handed to it directly (a terminal
// stays a terminal, *os.File streams are not copied). It waits for the
// command, wipes the sandbox and returns how the command ended, with the
// wipe's report. A command ended by a limit has a Reason: "time_box",
// "memory" or "pids"; when ctx ends, the command is killed and Run returns
// Reason "deleted" with ctx's error. Errors: ErrCapacity; an invalid option
// (egress is not available to a one-command sandbox); ErrNoCommand, before
// any sandbox starts, for a command the host can tell the sandbox has not
// (see commandView.find); a failed start. A Close waits for Run to end.
// Like Create, it calls opts.Image's Release exactly once.
func (r *Runtime) Run(ctx context.Context, opts Options, argv []string, stdin io.Reader, stdout, stderr io.Writer) (_ agentsandbox.ExecResult, _ WipeReport, err error) {
	opts.Image = opts.Image.once()
	defer func() {
		if err != nil {
			opts.Image.release()
		}
	}()
	opts, err = resolve(opts)
	switch {
	case opts.Image != nil && !r.initStatic:
		return agentsandbox.ExecResult{}, WipeReport{}, fmt.Errorf("run: %w: %s", ErrNoImages, r.ImageProblems()[0])
	case err != nil:
		return agentsandbox.ExecResult{}, WipeReport{}, fmt.Errorf("run: %w", err)
	case opts.Egress:
		return agentsandbox.ExecResult{}, WipeReport{}, errors.New("run: egress is not available to a one-command sandbox")
	case len(argv) == 0 || argv[0] == "":
		return agentsandbox.ExecResult{}, WipeReport{}, errors.New("run: empty argv")
	case slices.ContainsFunc(argv, func(a string) bool { return strings.IndexByte(a, 0) >= 0 }):
		return agentsandbox.ExecResult{}, WipeReport{}, errors.New("run: an argument contains a NUL byte")
	case len(r.LimitProblems()) > 0:
		return agentsandbox.ExecResult{}, WipeReport{}, fmt.Errorf("run: %w: %s", ErrLimits, strings.Join(r.LimitProblems(), "; "))
	}
	pathEnv, ok := opts.Env["PATH"]
	if !ok {
		pathEnv = baseEnv()["PATH"]
	}
	// In an image the host cannot see what the command is: the init's shim
	// looks it up inside.
	first := firstShim
	if opts.Image == nil {
		found := r.view.find(argv[0], pathEnv)
		if found == commandMissing {
			if strings.Contains(argv[0], "/") {
				return agentsandbox.ExecResult{}, WipeReport{}, fmt.Errorf("run: %s: %w (no such file in the sandbox)", argv[0], ErrNoCommand)
			}
			return agentsandbox.ExecResult{}, WipeReport{}, fmt.Errorf("run: %s: %w (looked for in the sandbox's PATH, %s)", argv[0], ErrNoCommand, pathEnv)
		}
		first = r.firstProcess(found)
	}
	b, err := r.claim(opts)
	if err != nil {
		return agentsandbox.ExecResult{}, WipeReport{}, err
	}
	b.direct = &directRun{argv: argv, stdin: stdin, stdout: stdout, stderr: stderr, first: first}
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	err = r.start(sctx, b)
	cancel()
	if err != nil {
		rep := r.wipe(b, "deleted")
		return agentsandbox.ExecResult{}, rep, fmt.Errorf("run: %w", err)
	}
	timer := time.NewTimer(opts.TimeBox)
	defer timer.Stop()
	why := ""
	select {
	case <-b.exited:
	case <-timer.C:
		why = "time_box"
	case <-ctx.Done():
		why = "deleted"
	}
	var res agentsandbox.ExecResult
	if why == "" {
		res = agentsandbox.ExecResult{ExitCode: exitStatus(b.cmd.ProcessState)}
		if ev, err := b.group.Events(); err == nil && res.ExitCode != 0 {
			switch {
			case ev.OOMKills > 0:
				res.Reason = "memory"
			case ev.PidsMax > 0:
				res.Reason = "pids"
			}
		}
	}
	rep := r.wipe(b, cmp.Or(why, "exited"))
	if why != "" {
		res = agentsandbox.ExecResult{ExitCode: exitStatus(b.cmd.ProcessState), Reason: why}
	}
	if why == "deleted" {
		return res, rep, fmt.Errorf("run: %w", ctx.Err())
	}
	return res, rep, nil
}

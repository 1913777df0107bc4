// Package runcmd is `codes-sandbox run`: one command in a fresh sandbox,
// with its standard streams passed through. It imports the sandbox runtime,
// internal/cli, x/sys/unix and the standard library only, so that the
// program that serves it, cmd/codes-sandbox, starts and exits in a fraction
// of the worker's time. It also holds the sandbox limit flags, which the
// worker shares.
package runcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/cli"
	"openvibe.network/agentsandbox/sandbox"
)

// Summary is the command's line in the program's usage.
const Summary = "run one command in a fresh sandbox"

// Main is the program when its command is run, args the arguments after
// "run": it keeps every descriptor it inherited without close-on-exec from
// reaching the sandbox, ends the run at the first SIGINT or SIGTERM, and
// returns the exit code.
func Main(args []string) int {
	_ = unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	ctx, stop := cli.Interruptible(context.Background())
	defer stop()
	return Run(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}

const runHelp = `Runs CMD in a fresh sandbox (no network, read-only OS, tmpfs /workspace,
cgroup limits, time box), passes stdin, stdout and stderr through, wipes the
sandbox (also on Ctrl-C) and exits with CMD's exit code. When a limit ends
CMD, the exit code is non-zero (137 when killed) and one line on stderr names
the limit. Must run as root (the sandbox itself runs as an unprivileged uid).`

// Images gives `run --image` its image: the worker's image store (the
// program that serves a plain run has none, and hands a run with --image
// to the worker: see WantsImage).
type Images interface {
	// Register adds the flags that say where images come from.
	Register(fs *flag.FlagSet)
	// Acquire holds the image ref for the run; done releases what it
	// opened, once the run's sandbox is wiped.
	Acquire(ctx context.Context, ref string) (img *sandbox.RootImage, done func(), err error)
}

// WantsImage reports whether run's args (before "--") give --image.
func WantsImage(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--image" || a == "-image" || strings.HasPrefix(a, "--image=") || strings.HasPrefix(a, "-image=") {
			return true
		}
	}
	return false
}

// Run runs one command in a fresh sandbox, as `codes-sandbox run` with args
// does, and returns the program's exit code; see runHelp.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return RunWith(ctx, args, stdin, stdout, stderr, nil)
}

// RunWith is Run with images (nil: none, and --image is refused).
func RunWith(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, images Images) int {
	fs := cli.NewFlagSet("codes-sandbox run", "[flags] -- CMD [ARGS...]", runHelp)
	env := envFlags{}
	var o sandbox.Options
	var lf LimitFlags
	var ref string
	fs.DurationVar(&o.TimeBox, "time-box", agentsandbox.DefaultTimeBox, "how long the sandbox may live (1s to 30m)")
	lf.Register(fs, "of the sandbox")
	fs.Var(env, "env", "K=V added to the command's environment (repeatable)")
	fs.StringVar(&ref, "image", "", "run CMD on this image (`REF`, from an --image-registry) instead of the host's view")
	if images != nil {
		images.Register(fs)
	}
	if code, ok := cli.Parse(fs, args, 0, -1, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() == 0 || fs.Arg(0) == "" {
		fmt.Fprintln(stderr, "codes-sandbox run: no command given (codes-sandbox run [flags] -- CMD [ARGS...])")
		return 2
	}
	var err error
	if o.Limits, err = lf.Limits(); err != nil {
		fmt.Fprintf(stderr, "codes-sandbox run: %v\n", err)
		return 2
	}
	if o.TimeBox < sandbox.MinTimeBox || o.TimeBox > agentsandbox.MaxTimeBox {
		fmt.Fprintf(stderr, "codes-sandbox run: --time-box is %v; give %v to %v\n", o.TimeBox, sandbox.MinTimeBox, agentsandbox.MaxTimeBox)
		return 2
	}
	o.Env = env
	if ref != "" {
		if images == nil {
			fmt.Fprintln(stderr, "codes-sandbox run: --image is served by codes-sandbox-worker (run it through codes-sandbox)")
			return 2
		}
		img, done, err := images.Acquire(ctx, ref)
		if err != nil {
			fmt.Fprintf(stderr, "codes-sandbox run: %v\n", err)
			return 125
		}
		defer done()
		o.Image = img
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	// The sandbox's first process, when neither the command itself nor
	// prlimit can be (see sandbox.Runtime.Run), is this program re-executed
	// as the capped-exec shim: its main runs capexec.MaybeRun first. It is
	// smaller than the lean init, which carries the egress bridge that a
	// one-off sandbox never has.
	rt, err := sandbox.NewRuntime(sandbox.Config{Capacity: 1, Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "codes-sandbox run: %v\n", err)
		return 125
	}
	defer rt.Close()
	res, rep, err := rt.Run(ctx, o, fs.Args(), stdin, stdout, stderr)
	if !rep.Verified && len(rep.Leftovers) > 0 {
		fmt.Fprintf(stderr, "codes-sandbox run: the wipe could not be verified: %s\n", strings.Join(rep.Leftovers, "; "))
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "codes-sandbox run: interrupted; the sandbox was killed and wiped")
		return 130
	case errors.Is(err, sandbox.ErrNoCommand):
		fmt.Fprintf(stderr, "codes-sandbox %v\n", err)
		return 127 // as the shell's
	case err != nil:
		fmt.Fprintf(stderr, "codes-sandbox run: %v\n", err)
		return 125
	}
	if res.Reason != "" {
		fmt.Fprintf(stderr, "codes-sandbox run: %s\n", reasonText(res.Reason, o))
		if res.ExitCode == 0 {
			return 137
		}
	}
	return res.ExitCode
}

// reasonText says which limit ended the command.
func reasonText(reason string, o sandbox.Options) string {
	switch reason {
	case "time_box":
		return fmt.Sprintf("the time box (%v) ended the command", o.TimeBox)
	case "memory":
		return fmt.Sprintf("the memory limit (%d MB) killed the command", o.Limits.MemoryMB)
	case "pids":
		return fmt.Sprintf("the process limit (%d pids) was reached", o.Limits.Pids)
	case "timeout":
		return "the command's timeout ended it"
	}
	return "the sandbox ended (" + reason + ")"
}

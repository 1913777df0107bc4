package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"

	"openvibe.network/agentsandbox/client"
)

// rawBwrap is raw bubblewrap with the namespaces of a sandbox running
// /bin/true (as scripts/bench-worker.sh runs it).
var rawBwrap = []string{"bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv",
	"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
	"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "/bin/true"}

// burstResult is one side's round: each call's latency from the release,
// and the wall until the last ended.
type burstResult struct {
	lat  durations
	wall time.Duration
}

// together runs fn(i) for i < n in n goroutines released at once.
// Errors: the first of fn's.
func together(n int, fn func(i int) error) (burstResult, error) {
	release := make(chan struct{})
	lat := make(durations, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	var start time.Time
	for i := range n {
		wg.Go(func() {
			<-release
			errs[i] = fn(i)
			lat[i] = time.Since(start)
		})
	}
	time.Sleep(10 * time.Millisecond) // let every goroutine reach the release
	start = time.Now()
	close(release)
	wg.Wait()
	r := burstResult{lat: lat, wall: time.Since(start)}
	for _, err := range errs {
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

// burstCmd runs the interleaved bursts (see the package doc).
func burstCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("burst", flag.ContinueOnError)
	workerURL := fs.String("worker", "", "the worker's API, http://127.0.0.1:PORT")
	tokenFile := fs.String("token-file", "", "file holding the API token")
	n := fs.Int("clients", 50, "calls released at once")
	rounds := fs.Int("rounds", 3, "rounds, each side once in each")
	bwrap := fs.Bool("bwrap", true, "run raw bubblewrap's side")
	if err := fs.Parse(args); err != nil {
		return err
	}
	w, err := newWorker(*workerURL, *tokenFile, *n)
	if err != nil {
		return err
	}
	sides := []string{"create", "exec", "fork"}
	if *bwrap {
		sides = append([]string{"bwrap"}, sides...)
	}
	res := map[string][]burstResult{}
	for r := range *rounds {
		ids := make([]string, *n)
		run := map[string]func(i int) error{
			"bwrap": func(int) error { return exec.CommandContext(ctx, rawBwrap[0], rawBwrap[1:]...).Run() },
			"fork":  func(int) error { return exec.CommandContext(ctx, "/bin/true").Run() },
			"create": func(i int) error {
				info, err := w.Create(ctx, client.CreateOptions{})
				ids[i] = info.ID
				return err
			},
			"exec": func(i int) error {
				res, err := w.Sandbox(ids[i]).Exec(ctx, client.ExecRequest{Argv: []string{"/bin/true"}}, io.Discard, io.Discard)
				if err == nil && res.ExitCode != 0 {
					err = fmt.Errorf("/bin/true exited %d (%s)", res.ExitCode, res.Reason)
				}
				return err
			},
		}
		// bubblewrap goes first in even rounds, last in odd ones; the
		// host's fork+exec just before or just after the execs.
		order := []string{"create", "exec", "fork"}
		if r%2 == 1 {
			order = []string{"create", "fork", "exec"}
		}
		if *bwrap {
			if r%2 == 0 {
				order = append([]string{"bwrap"}, order...)
			} else {
				order = append(order, "bwrap")
			}
		}
		for _, side := range order {
			br, err := together(*n, run[side])
			if err != nil {
				deleteAll(ctx, w, ids)
				return fmt.Errorf("round %d, %s: %w", r+1, side, err)
			}
			res[side] = append(res[side], br)
		}
		if err := deleteAll(ctx, w, ids); err != nil {
			return fmt.Errorf("round %d, delete: %w", r+1, err)
		}
	}
	fmt.Fprintf(out, "burst: %d at once, %d rounds, sides interleaved; %d cores, load average %s\n", *n, *rounds, numCPU(), loadAvg())
	fmt.Fprintf(out, "  %-7s %10s %10s %10s   (medians over the rounds, ms)\n", "side", "p50", "p99", "wall")
	med := map[string][3]float64{}
	for _, side := range sides {
		var p50, p99, wall []float64
		for _, br := range res[side] {
			p50, p99, wall = append(p50, br.lat.pct(50)), append(p99, br.lat.pct(99)), append(wall, ms(br.wall))
		}
		med[side] = [3]float64{median(p50), median(p99), median(wall)}
		fmt.Fprintf(out, "  %-7s %10.1f %10.1f %10.1f\n", side, med[side][0], med[side][1], med[side][2])
	}
	ratio := func(a, b string, k int) []float64 {
		var xs []float64
		for i := range res[a] {
			x := [3]float64{res[a][i].lat.pct(50), res[a][i].lat.pct(99), ms(res[a][i].wall)}
			y := [3]float64{res[b][i].lat.pct(50), res[b][i].lat.pct(99), ms(res[b][i].wall)}
			xs = append(xs, x[k]/y[k])
		}
		return xs
	}
	if *bwrap {
		fmt.Fprintf(out, "  create/bwrap wall %.2fx, p99 %.2fx (medians of the rounds' ratios)\n", median(ratio("create", "bwrap", 2)), median(ratio("create", "bwrap", 1)))
	}
	fmt.Fprintf(out, "  exec/fork p99 %.2fx, p50 %.2fx (medians of the rounds' ratios)\n", median(ratio("exec", "fork", 1)), median(ratio("exec", "fork", 0)))
	return checkEmpty(ctx, w)
}

// deleteAll deletes the sandboxes of ids ("" skipped), n at once.
// Errors: the first delete's.
func deleteAll(ctx context.Context, w *client.Worker, ids []string) error {
	_, err := together(len(ids), func(i int) error {
		if ids[i] == "" {
			return nil
		}
		_, err := w.Delete(context.WithoutCancel(ctx), ids[i])
		return err
	})
	return err
}

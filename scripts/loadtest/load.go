package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"openvibe.network/agentsandbox/client"
)

// The operations of a load round, in order.
var ops = []string{"create", "exec", "upload", "download", "delete"}

// httpClient keeps n connections alive to the worker (net/http keeps 2 by
// default, so more clients would open a connection per request).
func httpClient(n int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = n+8, n+8
	return &http.Client{Transport: tr}
}

// loadCmd runs the load and prints its figures (see the package doc).
func loadCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	workerURL := fs.String("worker", "", "the worker's API, http://127.0.0.1:PORT")
	tokenFile := fs.String("token-file", "", "file holding the API token")
	clients := fs.Int("clients", 1, "clients, each a loop of rounds")
	duration := fs.Duration("duration", 20*time.Second, "how long the clients start new rounds")
	pid := fs.Int("pid", 0, "the worker's process id, for its RSS and descriptors (0: not sampled)")
	fileBytes := fs.Int("file-bytes", 4096, "size of the file uploaded and downloaded in each round")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *clients < 1 || *fileBytes < 0 {
		return fmt.Errorf("--clients %d --file-bytes %d: give at least 1 client and 0 bytes", *clients, *fileBytes)
	}
	w, err := newWorker(*workerURL, *tokenFile, *clients)
	if err != nil {
		return err
	}
	content := make([]byte, *fileBytes)
	if _, err := rand.Read(content); err != nil {
		return fmt.Errorf("make the file: %w", err)
	}
	before := sampleProc(*pid)
	samples := make(chan procSample, 1)
	sctx, stopSampling := context.WithCancel(ctx)
	go func() { samples <- peakProc(sctx, *pid, 200*time.Millisecond) }()

	lat := make([][]durations, *clients)
	errs := make([]errCount, *clients)
	rounds := make([]int, *clients)
	deadline := time.Now().Add(*duration)
	start := time.Now()
	var wg sync.WaitGroup
	for c := range *clients {
		lat[c] = make([]durations, len(ops))
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if err := round(ctx, w, content, lat[c]); err != nil {
					errs[c].add(err)
					continue
				}
				rounds[c]++
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopSampling()
	peak := <-samples
	after := sampleProc(*pid)

	all := make([]durations, len(ops))
	var total int
	var failed errCount
	for c := range *clients {
		for i := range ops {
			all[i] = append(all[i], lat[c][i]...)
		}
		total += rounds[c]
		if errs[c].n > 0 {
			failed.n += errs[c].n
			if failed.first == nil {
				failed.first = errs[c].first
			}
		}
	}
	fmt.Fprintf(out, "load: %d client(s) for %v (the last rounds ended %.1fs after the start), %d B file; %d cores, load average %s\n",
		*clients, *duration, elapsed.Seconds(), *fileBytes, numCPU(), loadAvg())
	fmt.Fprintf(out, "  rounds %d, %.2f rounds/s, %.1f operations/s, failed rounds %d\n",
		total, float64(total)/elapsed.Seconds(), float64(total*len(ops))/elapsed.Seconds(), failed.n)
	for i, op := range ops {
		fmt.Fprintf(out, "  %-9s n=%-6d p50 %8.2f ms   p99 %8.2f ms   max %8.2f ms\n",
			op, len(all[i]), all[i].pct(50), all[i].pct(99), all[i].pct(100))
	}
	if *pid > 0 {
		fmt.Fprintf(out, "  worker pid %d: RSS before %.1f MiB, peak %.1f MiB, after %.1f MiB; descriptors before %d, peak %d, after %d\n",
			*pid, mib(before.rss), mib(peak.rss), mib(after.rss), before.fds, peak.fds, after.fds)
	}
	if err := failed.err("round(s)"); err != nil {
		return err
	}
	return checkEmpty(ctx, w)
}

// round is one create → exec → upload → download → delete, each timed into
// lat (in ops' order). The sandbox is deleted even when a step fails.
func round(ctx context.Context, w *client.Worker, content []byte, lat []durations) (err error) {
	t := time.Now()
	info, err := w.Create(ctx, client.CreateOptions{})
	if err != nil {
		return err
	}
	lat[0] = append(lat[0], time.Since(t))
	sb := w.Sandbox(info.ID)
	defer func() {
		t := time.Now()
		_, derr := sb.Delete(context.WithoutCancel(ctx))
		if derr != nil && err == nil {
			err = derr
		}
		if derr == nil {
			lat[4] = append(lat[4], time.Since(t))
		}
	}()
	t = time.Now()
	res, err := sb.Exec(ctx, client.ExecRequest{Argv: []string{"/bin/true"}}, io.Discard, io.Discard)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("/bin/true exited %d (%s)", res.ExitCode, res.Reason)
	}
	lat[1] = append(lat[1], time.Since(t))
	t = time.Now()
	if err := sb.Files().Put(ctx, "load.bin", bytes.NewReader(content), 0); err != nil {
		return err
	}
	lat[2] = append(lat[2], time.Since(t))
	t = time.Now()
	var got bytes.Buffer
	if err := sb.Files().Get(ctx, "load.bin", &got); err != nil {
		return err
	}
	lat[3] = append(lat[3], time.Since(t))
	if !bytes.Equal(got.Bytes(), content) {
		return errMismatch
	}
	return nil
}

// procSample is a process's resident memory (bytes) and open descriptors.
type procSample struct {
	rss int64
	fds int
}

// sampleProc reads pid's VmRSS and counts its descriptors (zero values
// when pid is 0 or gone).
func sampleProc(pid int) procSample {
	if pid <= 0 {
		return procSample{}
	}
	var s procSample
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	if b, err := os.ReadFile(filepath.Join(dir, "status")); err == nil {
		for line := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				f := strings.Fields(rest)
				if len(f) == 2 && f[1] == "kB" {
					kb, _ := strconv.ParseInt(f[0], 10, 64)
					s.rss = kb << 10
				}
			}
		}
	}
	if ents, err := os.ReadDir(filepath.Join(dir, "fd")); err == nil {
		s.fds = len(ents)
	}
	return s
}

// peakProc samples pid every interval until ctx ends and returns the
// largest RSS and descriptor count seen.
func peakProc(ctx context.Context, pid int, every time.Duration) procSample {
	var peak procSample
	if pid <= 0 {
		return peak
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		s := sampleProc(pid)
		peak.rss, peak.fds = max(peak.rss, s.rss), max(peak.fds, s.fds)
		select {
		case <-ctx.Done():
			return peak
		case <-tick.C:
		}
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

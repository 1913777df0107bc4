package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// result is what one run reports.
type result struct {
	Name     string  `json:"name"`
	Requests int     `json:"requests"`
	Seconds  float64 `json:"seconds"`
	PerSec   float64 `json:"per_second"`
	P50ms    float64 `json:"p50_ms"`
	P99ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	Non2xx   int     `json:"non_2xx"`
	Errors   int     `json:"errors"`
	// ServerCPUus is the server process's CPU time (user+system) per
	// measured request, in microseconds (0 when its pid is not given).
	ServerCPUus float64 `json:"server_cpu_us_per_request"`
}

// runConfig is one load run.
type runConfig struct {
	name, url, token, subject, streamPrefix string
	streams, conns, maxRequests, serverPID  int
	duration, warmup                        time.Duration
	body                                    []byte
}

func runCmd(ctx context.Context, args []string) error {
	var c runConfig
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.StringVar(&c.name, "name", "ovlive", "the run's `NAME` in the report")
	fs.StringVar(&c.url, "url", "", "the server's loopback base `URL`, e.g. http://127.0.0.1:8080")
	fs.StringVar(&c.token, "token", "", "the service token to send")
	fs.StringVar(&c.subject, "subject", "", "the X-OV-Subject to send")
	fs.StringVar(&c.streamPrefix, "stream-prefix", "bench-", "stream ids are `PREFIX`000, PREFIX001, ...")
	fs.IntVar(&c.streams, "streams", 100, "how many streams check in")
	fs.IntVar(&c.conns, "conns", 64, "how many connections (and concurrent requests)")
	fs.IntVar(&c.maxRequests, "max-requests", 2_000_000, "stop after this many requests")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to measure")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "how long to send before measuring")
	fs.IntVar(&c.serverPID, "server-pid", 0, "the server's `PID`, to report its CPU time per request")
	bodyFile := fs.String("body", "", "the check-in report `FILE`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := loopbackURL(c.url); err != nil {
		return err
	}
	if c.streams < 1 || c.conns < 1 || c.duration <= 0 || c.duration > 10*time.Minute {
		return fmt.Errorf("want --streams >= 1, --conns >= 1, 0 < --duration <= 10m")
	}
	var err error
	if c.body, err = os.ReadFile(*bodyFile); err != nil {
		return err
	}
	r, err := runLoad(ctx, c)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// runLoad sends check-ins from c.conns workers, stream after stream, for the
// warm-up and then for c.duration, and measures the latter.
func runLoad(ctx context.Context, c runConfig) (result, error) {
	tr := &http.Transport{MaxIdleConns: c.conns, MaxIdleConnsPerHost: c.conns, MaxConnsPerHost: c.conns, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(ctx, c.warmup+c.duration)
	defer cancel()
	start := time.Now().Add(c.warmup)
	type tally struct {
		lat            []time.Duration
		non2xx, errors int
	}
	tallies := make([]tally, c.conns)
	cpu0 := make(chan time.Duration, 1)
	go func() {
		time.Sleep(time.Until(start))
		cpu0 <- cpuTime(c.serverPID)
	}()
	var wg sync.WaitGroup
	for w := range c.conns {
		wg.Go(func() {
			t := &tallies[w]
			for i := w; ctx.Err() == nil && len(t.lat) < c.maxRequests/c.conns; i += c.conns {
				stream := fmt.Sprintf("%s%03d", c.streamPrefix, i%c.streams)
				t0 := time.Now()
				status, err := post(ctx, client, c, stream)
				d := time.Since(t0)
				if ctx.Err() != nil || t0.Before(start) {
					continue // warm-up, or cut off by the end of the run
				}
				switch {
				case err != nil:
					t.errors++
				case status < 200 || status > 299:
					t.non2xx++
				}
				t.lat = append(t.lat, d)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime(c.serverPID) - <-cpu0
	var all []time.Duration
	r := result{Name: c.name}
	for _, t := range tallies {
		all = append(all, t.lat...)
		r.Non2xx += t.non2xx
		r.Errors += t.errors
	}
	if len(all) == 0 {
		return r, fmt.Errorf("%s: no request completed", c.name)
	}
	slices.Sort(all)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	r.Requests, r.Seconds = len(all), elapsed.Seconds()
	r.PerSec = float64(len(all)) / elapsed.Seconds()
	r.ServerCPUus = float64(cpu.Microseconds()) / float64(len(all))
	r.P50ms, r.P99ms, r.MaxMs = ms(all[len(all)*50/100]), ms(all[len(all)*99/100]), ms(all[len(all)-1])
	return r, nil
}

// post sends one check-in and returns its status.
func post(ctx context.Context, client *http.Client, c runConfig, stream string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/api/streams/agent/"+stream+"/plays/worker", bytes.NewReader(c.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("X-OV-Subject", c.subject)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// cpuTime returns the user+system CPU time of process pid so far, from
// /proc/PID/stat (0 when pid is 0 or unreadable).
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start at ") ".
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

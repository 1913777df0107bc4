package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/sandbox"
)

// The sandbox routes (state, usage, time box, limits) and the refusals of
// exec against real sandboxes, and the answers of the new routes against
// docs/openapi.yaml.

// TestRealUsage: the usage a sandbox reports moves when it writes a file
// and when a process of it holds memory, and falls back when it exits.
func TestRealUsage(t *testing.T) {
	api := newRealAPI(t, sandbox.Config{Capacity: 1}, nil)
	ctx := testCtx(t, 2*time.Minute)
	sb := api.newSandbox(t, ctx, client.CreateOptions{})
	usage := func() client.Usage {
		t.Helper()
		u, err := sb.Usage(ctx)
		if err != nil {
			t.Fatalf("Usage: %v", err)
		}
		return u
	}

	before := usage()
	mustExec(t, ctx, sb, "dd", "if=/dev/zero", "of=big", "bs=1M", "count=16")
	written := usage()
	if got := written.WorkspaceBytes - before.WorkspaceBytes; got < 16<<20 {
		t.Fatalf("workspace_bytes grew by %d after writing 16 MiB: %+v then %+v", got, before, written)
	}

	holding := errors.New("holding")
	hog, err := sb.Start(ctx, client.ExecRequest{Argv: []string{"python3", "-c",
		"import sys; b = b'x' * (64 << 20); print('holding', flush=True); sys.stdin.read()"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	_, err = hog.Output(ctx, true, func(ev client.ExecEvent) error {
		if strings.Contains(string(ev.Data), "holding") {
			return holding
		}
		return nil
	})
	if !errors.Is(err, holding) {
		t.Fatalf("Output until the memory is held: %v", err)
	}
	held := usage()
	if got := held.MemoryBytes - written.MemoryBytes; got < 48<<20 || held.Pids <= written.Pids {
		t.Fatalf("memory_bytes grew by %d while 64 MiB are held, pids %d then %d: %+v", got, written.Pids, held.Pids, held)
	}
	if held.MemoryPeakBytes != 0 && held.MemoryPeakBytes < held.MemoryBytes {
		t.Fatalf("memory_peak_bytes %d is below memory_bytes %d", held.MemoryPeakBytes, held.MemoryBytes)
	}
	if err := hog.Stdin(ctx, nil, true); err != nil {
		t.Fatalf("Stdin close: %v", err)
	}
	if rec, err := hog.Wait(ctx); err != nil || rec.ExitCode != 0 {
		t.Fatalf("Wait: %+v %v", rec, err)
	}
	if freed := usage(); freed.MemoryBytes > held.MemoryBytes-32<<20 {
		t.Fatalf("memory_bytes %d after the exit, %d while held", freed.MemoryBytes, held.MemoryBytes)
	}
}

// TestRealExtend: a sandbox whose time box was extended through the API
// lives past its first one, while a twin that was not ends. Both are
// created through the runtime with a time box of seconds (the API's
// shortest is 5 minutes), long enough that both creates and the extend
// fit in it on a loaded machine.
func TestRealExtend(t *testing.T) {
	api := newRealAPI(t, sandbox.Config{Capacity: 2}, nil)
	ctx := testCtx(t, 2*time.Minute)
	const box = 20 * time.Second
	var infos [2]sandbox.Info
	for i := range infos {
		in, err := api.rt.Create(ctx, sandbox.Options{TimeBox: box})
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		infos[i] = in
		t.Cleanup(func() { _, _ = api.rt.Delete(context.Background(), in.ID) })
	}
	kept, ended := api.w.Sandbox(infos[0].ID), api.w.Sandbox(infos[1].ID)

	info, err := kept.Extend(ctx, 5)
	if err != nil || info.Limits.TimeBoxMinutes != 5 || !info.ExpiresAt.Equal(infos[0].ExpiresAt.Add(5*time.Minute-box)) {
		t.Fatalf("Extend: %+v %v (first expiry %v)", info, err, infos[0].ExpiresAt)
	}
	if _, err := kept.Extend(ctx, 4); !errors.Is(err, client.ErrInvalidRequest) {
		t.Fatalf("Extend under 5 minutes: %v", err)
	}

	waitFor(t, func() bool {
		_, err := ended.Info(ctx)
		return errors.Is(err, client.ErrSandboxNotFound) && time.Now().After(infos[0].ExpiresAt.Add(time.Second))
	})
	if out := mustExec(t, ctx, kept, "echo", "alive"); out != "alive\n" {
		t.Fatalf("exec past the first time box: %q", out)
	}
	if in, err := kept.Info(ctx); err != nil || in.State != "running" || !in.ExpiresAt.Equal(info.ExpiresAt) {
		t.Fatalf("Info past the first time box: %+v %v", in, err)
	}
}

// spawnScript starts up to 64 sleeps, prints how many it could, and kills
// them.
const spawnScript = `
import subprocess
ps = []
try:
    for i in range(64):
        ps.append(subprocess.Popen(["sleep", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
except OSError:
    pass
print(len(ps))
for p in ps:
    p.kill()
`

// TestRealLimits: limits asked for on create are the sandbox's (its pids
// limit stops a fork bomb early), within the worker's bounds.
func TestRealLimits(t *testing.T) {
	bounds := agentsandbox.Limits{MemoryMB: 1024, DiskMB: 128, Pids: 128, CPUPercent: 100}
	api := newRealAPI(t, sandbox.Config{Capacity: 1}, func(c *Config) { c.Limits = bounds })
	ctx := testCtx(t, 2*time.Minute)

	_, err := api.w.Create(ctx, client.CreateOptions{Limits: client.RequestLimits{Pids: 129}})
	if !errors.Is(err, client.ErrInvalidRequest) || !strings.Contains(err.Error(), "limits.pids is 129; give 16 to 128") {
		t.Fatalf("Create over the pids bound: %v", err)
	}
	sb := api.newSandbox(t, ctx, client.CreateOptions{Limits: client.RequestLimits{Pids: 32, MemoryMB: 256}})
	info, err := sb.Info(ctx)
	want := client.Limits{MemoryMB: 256, DiskMB: 128, Pids: 32, CPUPercent: 100, TimeBoxMinutes: 5}
	if err != nil || info.Limits != want {
		t.Fatalf("Info: %v; limits (-want +got):\n%s", err, cmp.Diff(want, info.Limits))
	}
	n, err := strconv.Atoi(strings.TrimSpace(mustExec(t, ctx, sb, "python3", "-c", spawnScript)))
	if err != nil || n == 0 || n >= 32 {
		t.Fatalf("started %d sleeps (%v) under a pids limit of 32", n, err)
	}
}

// procScript prints the command line of every process it can see.
const procScript = `
import os
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            print(open("/proc/%s/cmdline" % p).read().replace("\0", " "))
        except OSError:
            pass
`

// TestRealForegroundExecCancelled: closing the request of a foreground
// exec kills its command, as a second exec in the sandbox sees.
func TestRealForegroundExecCancelled(t *testing.T) {
	api := newRealAPI(t, sandbox.Config{Capacity: 1}, nil)
	ctx := testCtx(t, 2*time.Minute)
	sb := api.newSandbox(t, ctx, client.CreateOptions{})
	running := func() bool { return strings.Contains(mustExec(t, ctx, sb, "python3", "-c", procScript), "sleep 300") }

	stop := errors.New("stop")
	_, err := sb.ExecStream(ctx, client.ExecRequest{Argv: []string{"sh", "-c", "echo started; exec sleep 300"}}, func(client.ExecEvent) error {
		if !running() {
			t.Error("the command is not seen running")
		}
		return stop // closes the request
	})
	if !errors.Is(err, stop) {
		t.Fatalf("ExecStream: %v, want the callback's error", err)
	}
	waitFor(t, func() bool { return !running() })
	ps, err := sb.Processes(ctx)
	if err != nil || len(ps) == 0 || ps[0].Running() || ps[0].Background || ps[0].ExitCode != 128+9 {
		t.Fatalf("Processes: %+v %v", ps, err)
	}
}

// TestRealBadCwd: a missing cwd, or one that is a file, is a 400 that
// names it, for every way of starting a command.
func TestRealBadCwd(t *testing.T) {
	api := newRealAPI(t, sandbox.Config{Capacity: 1}, nil)
	ctx := testCtx(t, 2*time.Minute)
	sb := api.newSandbox(t, ctx, client.CreateOptions{})
	mustExec(t, ctx, sb, "touch", "file")
	starts := map[string]func(cwd string) error{
		"Exec": func(cwd string) error {
			_, err := sb.Exec(ctx, client.ExecRequest{Argv: []string{"true"}, Cwd: cwd}, nil, nil)
			return err
		},
		"Start": func(cwd string) error {
			_, err := sb.Start(ctx, client.ExecRequest{Argv: []string{"true"}, Cwd: cwd})
			return err
		},
		"Run": func(cwd string) error {
			_, err := sb.Run(ctx, client.ExecRequest{Argv: []string{"true"}, Cwd: cwd}, nil, nil, nil)
			return err
		},
		"Terminal": func(cwd string) error {
			_, err := sb.Terminal(ctx, client.TerminalOptions{Argv: []string{"sh"}, Cwd: cwd})
			return err
		},
	}
	for _, tc := range []struct {
		name, cwd, want string
	}{
		{"Missing", "no/such/dir", `cwd "no/such/dir" does not exist in the workspace`},
		{"File", "file", `cwd "file" is not a directory`},
	} {
		for name, start := range starts {
			t.Run(tc.name+name, func(t *testing.T) {
				err := start(tc.cwd)
				var ae *client.APIError
				if !errors.As(err, &ae) || !errors.Is(err, client.ErrInvalidRequest) || ae.StatusCode != 400 || !strings.Contains(ae.Message, tc.want) {
					t.Fatalf("error %v, want a 400 with %q", err, tc.want)
				}
			})
		}
	}
	if ps, err := sb.Processes(ctx); err != nil || len(ps) != 1 {
		t.Fatalf("Processes: %+v %v; want only the touch", ps, err)
	}
}

// TestRealOpenAPINewRoutes: the answers of the routes of sandbox state,
// time box, background exec and processes, from real sandboxes, match the
// document.
func TestRealOpenAPINewRoutes(t *testing.T) {
	o := loadOpenAPI(t)
	api := newRealAPI(t, sandbox.Config{Capacity: 1}, nil)
	ctx := testCtx(t, 2*time.Minute)
	ts := &testServer{srv: api.srv}
	p := "/v1/sandboxes/" + api.newSandbox(t, ctx, client.CreateOptions{}).ID()
	ask := func(method, path, body string, hdr map[string]string, status int) answer {
		t.Helper()
		a := ts.do(t, method, path, body, hdr)
		if a.status != status {
			t.Fatalf("%s %s: %d %s, want %d", method, path, a.status, a.body, status)
		}
		o.validate(t, method, path, a)
		return a
	}
	started := func(argv string) string {
		t.Helper()
		var proc Process
		if err := json.Unmarshal(ask("POST", p+"/exec", `{"argv":`+argv+`,"background":true}`, nil, 201).body, &proc); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%s/processes/%d", p, proc.Pid)
	}
	octets := map[string]string{"Content-Type": "application/octet-stream"}
	js := map[string]string{"Content-Type": "application/json"}

	ask("GET", p, "", nil, 200)
	ask("PATCH", p, `{"time_box_minutes":6}`, nil, 200)
	ask("PATCH", p, `{"time_box_minutes":31}`, nil, 400)
	ask("POST", p+"/exec", `{"argv":["printf","\\377 binary"]}`, nil, 200)
	ask("POST", p+"/exec", `{"argv":["true"],"cwd":"missing"}`, nil, 400)
	cat := started(`["cat"]`)
	ask("POST", cat+"/stdin", "hello", octets, 204)
	ask("POST", cat+"/stdin", `{"data":" world","close":true}`, js, 204)
	out := ask("GET", cat+"/output?follow=1", "", nil, 200)
	var data strings.Builder
	evs := readAll(t, bytes.NewReader(out.body))
	for _, ev := range evs {
		data.WriteString(ev.Data)
	}
	if last := evs[len(evs)-1]; data.String() != "hello world" || last.Process == nil || last.Process.State != "exited" {
		t.Fatalf("output of cat: %s", out.body)
	}
	ask("GET", cat+"/output", "", nil, 200)
	ask("GET", cat, "", nil, 200)
	ask("POST", cat+"/signal", `{"signal":"TERM"}`, nil, 409)
	ask("POST", cat+"/stdin", "late", octets, 409)
	ask("POST", p+"/processes/999999/signal", `{"signal":"TERM"}`, nil, 404)
	ask("GET", cat+"/attach", "", nil, 400)
	sleep := started(`["sleep","300"]`)
	ask("GET", p+"/processes", "", nil, 200)
	ask("POST", sleep+"/signal", `{"signal":"BOGUS"}`, nil, 400)
	ask("POST", sleep+"/signal", `{"signal":"TERM"}`, nil, 204)
	ask("GET", p+"/processes/999999", "", nil, 404)
	ask("GET", p+"/processes/x", "", nil, 400)
	ask("DELETE", p, "", nil, 200)
	ask("GET", p, "", nil, 404)
	ask("GET", sleep, "", nil, 404)
}

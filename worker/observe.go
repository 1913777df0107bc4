package worker

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox"
)

// probeTimeout bounds the probe's one exec (about a second on a real host;
// an emulated guest under load has taken over ten).
const probeTimeout = 30 * time.Second

// maxProbeOutput bounds what the worker keeps of the probe's output (a few
// KiB normally). Output beyond it is dropped and the probe counts as not
// run, since a cut output could hide a failure.
const maxProbeOutput = 1 << 20

// observation is everything the self-test saw; evaluate turns it into checks.
type observation struct {
	// setup is why the probe could not run at all (no sandbox, no exec).
	setup string
	// lines are the probe's output lines by first word; out is its whole
	// output (stdout and stderr).
	lines map[string][]string
	out   string
	exit  agentsandbox.ExecResult
	// secrets are the worker's values that must not be visible inside;
	// canaryAddr the listener on the host's loopback and canaryConns the
	// connections it accepted.
	secrets     []string
	canaryAddr  string
	canaryConns int64
	// guard, limits, mounts and wipe are the problems the host-side looks
	// found.
	guard  []string
	limits []string
	mounts []string
	wipe   []string
	egress bool
	// wiped is true once the probe sandbox was deleted.
	wiped bool
	// browser is set when the browser check ran or was to run: why it
	// failed, or why it could not run.
	browser               bool
	browserWhy, browserNR string
}

// observe runs the probe and the host-side looks.
func observe(ctx context.Context, d Deps) *observation {
	obs := &observation{egress: d.Egress, lines: map[string][]string{}, secrets: d.Secrets, browser: d.Browser != nil}
	obs.guard = append(guardVerdicts(ctx, d.Guard), hostVerdicts(ctx, d.Guard, d.HostAddrs)...)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		obs.setup = fmt.Sprintf("cannot open the canary listener: %v", err)
		return obs
	}
	var conns atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { countConns(ln, &conns) })
	defer func() { ln.Close(); wg.Wait(); obs.canaryConns = conns.Load() }()
	obs.canaryAddr = ln.Addr().String()

	files, cleanup, err := writeCanaries(d.CanaryDirs)
	if err != nil {
		obs.setup = err.Error()
		return obs
	}
	defer cleanup()

	if d.LimitProblems != nil {
		obs.limits = append(obs.limits, d.LimitProblems()...)
	}
	info, err := d.Sandboxes.Create(ctx, sandbox.Options{TimeBox: agentsandbox.DefaultTimeBox, Limits: probeLimits(), Egress: d.Egress, SelfTest: true})
	if err != nil {
		obs.setup = fmt.Sprintf("cannot create the probe sandbox: %v", err)
		return obs
	}
	view, viewErr := d.Inspect(info)
	runProbe(ctx, d, info, obs, files)
	pids, _ := d.Sandboxes.HostPids(info.ID)
	if viewErr != nil {
		obs.limits = append(obs.limits, fmt.Sprintf("cannot find the sandbox on the host: %v", viewErr))
	} else {
		obs.limits = append(obs.limits, checkCgroups(view.Cgroups, probeLimits())...)
		members, problems := checkMembers(d.ProcRoot, view)
		obs.limits = append(obs.limits, problems...)
		pids = append(pids, members...)
	}
	inside := sandboxProcesses(d.ProcRoot, pids)
	obs.mounts = checkMounts(d.ProcRoot, inside)
	if d.MaxOpenFiles > 0 {
		obs.limits = append(obs.limits, checkFileLimits(d.ProcRoot, inside, d.MaxOpenFiles)...)
	}
	rep, err := d.Sandboxes.Delete(context.WithoutCancel(ctx), info.ID)
	obs.wipe, obs.wiped = checkWipe(rep, err, view, viewErr, pids, d.ProcRoot), true
	if d.Browser != nil {
		before := conns.Load()
		obs.browser = true
		obs.browserWhy, obs.browserNR = observeBrowser(ctx, d, obs)
		if n := conns.Load() - before; n > 0 && obs.browserWhy == "" {
			obs.browserWhy = fmt.Sprintf("the canary listener on the host's %s received %d connection(s) from the browser", obs.canaryAddr, n)
		}
	}
	return obs
}

// runProbe runs the probe script once and records its output.
func runProbe(ctx context.Context, d Deps, info sandbox.Info, obs *observation, files []string) {
	argv := append([]string{"/bin/bash", "-c", probeScript, "probe", obs.canaryAddr}, files...)
	w := &lockedWriter{limit: maxProbeOutput}
	res, err := d.Sandboxes.Exec(ctx, info.ID, agentsandbox.ExecRequest{Argv: argv, Timeout: probeTimeout}, w, w)
	switch {
	case err != nil:
		obs.setup = fmt.Sprintf("cannot run the probe in the sandbox: %v", err)
		return
	case w.cut:
		obs.setup = fmt.Sprintf("the probe printed more than %d bytes", maxProbeOutput)
		return
	}
	obs.exit = res
	obs.out = w.buf.String()
	for _, l := range strings.Split(obs.out, "\n") {
		k, v, _ := strings.Cut(l, " ")
		obs.lines[k] = append(obs.lines[k], v)
	}
}

// lockedWriter serialises writes from the stdout and stderr streams and
// keeps at most limit bytes; cut says that more was written.
type lockedWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	limit int
	cut   bool
}

// Write keeps what fits under the limit and reports all of p written, so
// the writer is never stopped early by an error.
func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	keep := min(len(p), l.limit-l.buf.Len())
	l.buf.Write(p[:keep])
	l.cut = l.cut || keep < len(p)
	return len(p), nil
}

// countConns accepts (and closes) every connection to the canary listener.
func countConns(ln net.Listener, n *atomic.Int64) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		n.Add(1)
		c.Close()
	}
}

package worker

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/sandbox/control"
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
	// host are the reasons the host cannot run sandboxes (Deps.HostProblems),
	// one each: no probe was tried.
	host []string
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
	// datagramsRefused is Deps.InetDatagramsRefused.
	datagramsRefused bool
	// wiped is true once the probe sandbox was deleted.
	wiped bool
	// browser is set when the browser check ran or was to run: why it
	// failed, or why it could not run.
	browser               bool
	browserWhy, browserNR string
	// brokerValue is the probe secret's value when the credential broker
	// is proved (a sandbox with egress, of the host's view); brokerNR why
	// that check could not run; brokerSeen what the canary received and
	// brokerFiles what the host-side search of the sandbox's files found.
	brokerValue string
	brokerNR    string
	brokerSeen  []canaryRequest
	brokerFiles []string
}

// probeSecret is the name of the probe sandbox's secret, and
// probeSecretHost the one host it is for: a name no DNS answers, served by
// the self-test's TLS canary on the host's loopback (brokerCanary), which
// the proxy reaches for the probe sandbox only, through a dial hook.
const (
	probeSecret     = "PROBE_SECRET"
	probeSecretHost = "credentials-probe.invalid"
)

// observe runs the probe and the host-side looks, in a sandbox of the
// host's view or, when img is set, of the image it holds.
func observe(ctx context.Context, d Deps, img func(context.Context) (*sandbox.RootImage, error)) *observation {
	obs := &observation{egress: d.Egress, lines: map[string][]string{}, secrets: d.Secrets, browser: d.Browser != nil && img == nil,
		datagramsRefused: d.InetDatagramsRefused}
	if d.HostProblems != nil {
		if obs.host = d.HostProblems(); len(obs.host) > 0 {
			obs.setup = "this host cannot run sandboxes; each reason below names what is missing and the fix"
			return obs
		}
	}
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
	opts := sandbox.Options{TimeBox: agentsandbox.DefaultTimeBox, Limits: probeLimits(), Egress: d.Egress, SelfTest: true}
	if d.Egress && img == nil {
		obs.brokerValue = "probe-secret-" + randomHex(16)
		obs.secrets = slices.Concat(d.Secrets, []string{obs.brokerValue})
		if canary, err := startBrokerCanary(probeSecretHost, d.Now()); err != nil {
			obs.brokerNR = fmt.Sprintf("cannot start the TLS canary: %v", err)
		} else {
			defer func() { obs.brokerSeen = canary.close() }()
			opts.Secrets = map[string]agentsandbox.Secret{probeSecret: {Value: obs.brokerValue, Hosts: []string{probeSecretHost}}}
			opts.EgressCanary = canary.egress(probeSecretHost)
		}
	}
	if img != nil {
		if opts.Image, err = img(ctx); err != nil {
			obs.setup = fmt.Sprintf("cannot have the self-test's image: %v", err)
			return obs
		}
	}
	info, err := d.Sandboxes.Create(ctx, opts)
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
	if opts.EgressCanary != nil && viewErr == nil {
		obs.brokerFiles = scanForSecrets(view.Dirs, obs.brokerValue)
	}
	inside := sandboxProcesses(d.ProcRoot, pids)
	obs.mounts = checkMounts(d.ProcRoot, inside, view.Dirs)
	if d.MaxOpenFiles > 0 {
		obs.limits = append(obs.limits, checkFileLimits(d.ProcRoot, inside, d.MaxOpenFiles)...)
	}
	rep, err := d.Sandboxes.Delete(context.WithoutCancel(ctx), info.ID)
	obs.wipe, obs.wiped = checkWipe(rep, err, view, viewErr, pids, d.ProcRoot), true
	if obs.browser {
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
	req := agentsandbox.ExecRequest{Argv: argv, Timeout: probeTimeout}
	if info.ImageDigest != "" {
		// The image's own /root, /home, /var/lib and /etc/shadow are not
		// the host's: the probe looks for the canaries only.
		req.Env = map[string]string{"PROBE_IMAGE": "1"}
	}
	if len(info.Secrets) > 0 {
		// The broker check's HTTPS client (the init's) and the host the
		// probe secret is for.
		req.Env = map[string]string{"PROBE_INIT": control.InitPath, "PROBE_SECRET_HOST": probeSecretHost}
	}
	res, err := d.Sandboxes.Exec(ctx, info.ID, req, w, w)
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

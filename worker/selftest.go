// Package worker is the sandbox worker daemon's core: the self-test that
// proves each isolation fact with probes in a real sandbox, the check-in
// report built from what it proved, and the loop that checks in with Live.
// The HTTP API for OpenVibe.Codes is its subpackage worker/api.
package worker

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/sandbox"
)

// probeLimits are the small limits of the self-test's sandbox. The probe
// starts more processes than ProbeLimits.Pids to prove the limit holds.
func probeLimits() agentsandbox.Limits {
	return agentsandbox.Limits{MemoryMB: 256, DiskMB: 16, Pids: 32, CPUPercent: 50}
}

// probeForks is how many processes the probe tries to start.
const probeForks = 64

//go:embed probe.sh
var probeScript string

// Result is the outcome of one self-test.
type Result struct {
	// Checks maps every check that ran to whether it passed; a check that
	// could not run is absent (see NotRun), never reported as passed.
	Checks map[string]bool `json:"checks"`
	// NotRun lists the checks that could not run, in display order (empty,
	// never absent, when every check ran).
	NotRun []string `json:"not_run"`
	// Reasons say, for a person, why each failing check failed and why each
	// check that did not run could not.
	Reasons []string `json:"reasons"`
	// CheckedAt is when the self-test started.
	CheckedAt time.Time `json:"checked_at"`
	// Passed is true only when every check ran and passed.
	Passed bool `json:"passed"`
	// UserNamespace is true when the probe ran in its own user namespace
	// (its uid map is not the host's identity map).
	UserNamespace bool `json:"-"`
	// Duration is how long the self-test took.
	Duration time.Duration `json:"-"`
	// Image is what the checks proved in an image sandbox (nil: none was
	// tried); Passed needs it to pass too.
	Image *ImageResult `json:"image,omitempty"`
}

// ImageResult is the self-test's checks in an image sandbox.
type ImageResult struct {
	// Ref and Digest name the image.
	Ref    string          `json:"ref"`
	Digest string          `json:"digest"`
	Checks map[string]bool `json:"checks"`
	NotRun []string        `json:"not_run,omitempty"`
	Passed bool            `json:"passed"`
}

// Sandboxes is what the self-test needs of a sandbox runtime;
// *sandbox.Runtime implements it. Give the self-test the runtime's own view
// (sandbox.Runtime.SelfTest): its sandboxes are then out of the API's sight
// and reach, so no client's clean-up can fail the self-test.
type Sandboxes interface {
	Create(ctx context.Context, opts sandbox.Options) (sandbox.Info, error)
	Exec(ctx context.Context, id string, req agentsandbox.ExecRequest, stdout, stderr io.Writer) (agentsandbox.ExecResult, error)
	Delete(ctx context.Context, id string) (sandbox.WipeReport, error)
	HostPids(id string) ([]int, error)
}

// Guard is what the self-test asks of the egress guard: a verdict on a
// destination, decided without connecting; *egress.Guard implements it.
type Guard interface {
	Check(ctx context.Context, hostport string) egress.Verdict
}

// HostView says where a sandbox lives on the host, so the self-test can look
// at it from outside, independently of the runtime's own wipe report.
type HostView struct {
	// UID is the host uid the sandbox's processes run as.
	UID int
	// Dirs are the sandbox's host directories (state, control) that the
	// wipe must remove.
	Dirs []string
	// Cgroups are the sandbox's cgroup directories (one on v2, one per
	// controller on v1).
	Cgroups []string
}

// Deps are what SelfTest works with. Sandboxes, Guard and Inspect are
// required.
type Deps struct {
	Sandboxes Sandboxes
	Guard     Guard
	// Inspect returns where the sandbox info lives on the host.
	Inspect func(info sandbox.Info) (HostView, error)
	// CanaryDirs are host directories where the self-test writes a canary
	// file that must be invisible in the sandbox (the worker's state
	// directory, its home).
	CanaryDirs []string
	// Secrets are values of the worker's own (a canary it put in its
	// environment at start, its tokens) that must never be visible inside a
	// sandbox; clean_env fails when the probe's output holds one. They are
	// compared, never logged.
	Secrets []string
	// MaxOpenFiles is the descriptor limit every sandbox process must have
	// (the runtime's Config.MaxOpenFiles); 0 skips that part of limits.
	MaxOpenFiles int
	// InetDatagramsRefused says the runtime's sandboxes may not open UDP
	// sockets (the runtime's InetDatagramsRefused: a cgroup v1 host, which
	// cannot charge their buffers); limits then fails when the probe opens
	// one.
	InetDatagramsRefused bool
	// Egress gives the probe sandbox the egress proxy; without it
	// egress_refuses_private cannot be proved and fails.
	Egress bool
	// HostProblems, when set, says why this host cannot run sandboxes at
	// all (a capability, the seccomp or AppArmor profile, the cgroup mount:
	// the runtime's Config.HostProblems), each with its fix: while there
	// are any, no probe is tried and each is a reason of its own.
	HostProblems func() []string
	// LimitProblems, when set, says why the runtime cannot enforce every
	// limit (a cgroup controller not delegated); each fails limits with
	// its words first (the runtime's LimitProblems).
	LimitProblems func() []string
	// HostAddrs lists the host's own addresses (default: every address of
	// every interface); egress_refuses_private asks the guard, without
	// dialling, about each that is not loopback, on ports 80 and 443.
	HostAddrs func() ([]netip.Addr, error)
	// Browser, when set, runs the browser check (agentsandbox.CheckBrowser)
	// in a browser sandbox of its own: set it on a worker whose runtime has
	// a browser. Nil: no browser check, and the report claims no browser.
	Browser Browsers
	// Image, when set, holds the image the self-test proves its checks in
	// a second time (the worker's image sandboxes): the probe then runs in
	// a sandbox of the host's view and in one of that image, which needs
	// bash. Nil: no image sandbox is proved, and the report claims none.
	Image func(ctx context.Context) (*sandbox.RootImage, error)
	// ProcRoot is the host's /proc (default "/proc").
	ProcRoot string
	Logger   *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// privateTargets are the destinations the guard must refuse, asked without
// connecting (ports 80 and 443 so only the address decides).
func privateTargets() []string {
	return []string{
		"10.0.0.1:443", "172.16.0.1:443", "192.168.1.1:443", "169.254.169.254:80", "100.64.0.1:443",
		"[fd00::1]:443", "[::1]:443", "127.0.0.1:80",
	}
}

// SelfTest runs the nine checks in one short-lived sandbox with probeLimits,
// in the runtime's slot kept for the self-test (so a worker whose every slot
// is busy still proves its facts): one exec of the probe script, host-side
// looks at the sandbox's cgroup, processes, mounts and limits, the guard's
// verdicts, then the wipe and an independent look at what is left. When the
// probe cannot run at all (the runtime failed to create or reach the
// sandbox) it is tried once more; a check that still cannot run is reported
// as not run, with the reason. SelfTest never returns an error.
func SelfTest(ctx context.Context, d Deps) Result {
	if d.Now == nil {
		d.Now = time.Now
	}
	d.Logger = d.logger()
	if d.ProcRoot == "" {
		d.ProcRoot = "/proc"
	}
	start := d.Now()
	obs := observeTwice(ctx, d, nil)
	res := evaluate(obs)
	if d.Image != nil && len(obs.host) == 0 {
		res.Image = selfTestImage(ctx, d, &res)
	}
	res.CheckedAt, res.Duration = start, d.Now().Sub(start)
	level := slog.LevelInfo
	if !res.Passed {
		level = slog.LevelWarn
	}
	d.Logger.Log(ctx, level, "self-test", "passed", res.Passed, "failed", failed(res.Checks), "not_run", res.NotRun,
		"reasons", res.Reasons, "duration_ms", res.Duration.Milliseconds())
	return res
}

// observeTwice observes (in an image sandbox when img is set), and once
// more when the probe did not run: the runtime failed, not a property, and
// that proves nothing either way.
func observeTwice(ctx context.Context, d Deps, img func(context.Context) (*sandbox.RootImage, error)) *observation {
	obs := observe(ctx, d, img)
	if obs.setup != "" && len(obs.host) == 0 && ctx.Err() == nil {
		d.Logger.Warn("self-test probe did not run; trying once more", "reason", obs.setup, "image", img != nil)
		obs = observe(ctx, d, img)
	}
	return obs
}

// selfTestImage runs the checks in an image sandbox: their result, with
// res made to fail (its reasons saying why) unless they all pass.
func selfTestImage(ctx context.Context, d Deps, res *Result) *ImageResult {
	var ref, digest string
	held := func(ctx context.Context) (*sandbox.RootImage, error) {
		img, err := d.Image(ctx)
		if err == nil {
			ref, digest = img.Ref, img.Digest
		}
		return img, err
	}
	r := evaluate(observeTwice(ctx, d, held))
	out := &ImageResult{Ref: ref, Digest: digest, Checks: r.Checks, NotRun: r.NotRun, Passed: r.Passed}
	for _, why := range r.Reasons {
		res.Reasons = append(res.Reasons, trimReason("in an image sandbox: "+why))
	}
	res.Passed = res.Passed && r.Passed
	return out
}

func (d Deps) logger() *slog.Logger {
	if d.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Logger
}

// failed lists the checks that ran and failed, in display order.
func failed(checks map[string]bool) []string {
	var out []string
	for _, c := range append(agentsandbox.Checks(), agentsandbox.CheckCredentialsBrokered, agentsandbox.CheckBrowser) {
		if ok, ran := checks[c]; ran && !ok {
			out = append(out, c)
		}
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// portTargets are public addresses on ports other than 80 and 443: the
// guard must refuse each for its port (the report's egress.ports), asked
// without dialing.
func portTargets() []string { return []string{"1.1.1.1:22", "1.1.1.1:8080", "[2606:4700::1111]:25"} }

// addressReason reports whether reason is the guard's for refusing an
// address as one the sandbox must not reach.
func addressReason(reason string) bool {
	switch reason {
	case egress.ReasonPrivate, egress.ReasonSelf, egress.ReasonHostSelf:
		return true
	}
	return false
}

// interfaceAddrs lists every address of the host's interfaces.
func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list the host's addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range as {
		if ipn, ok := a.(*net.IPNet); ok {
			if addr, ok := netip.AddrFromSlice(ipn.IP); ok {
				out = append(out, addr.Unmap())
			}
		}
	}
	return out, nil
}

// hostVerdicts asks g, without dialling, about each of the host's own
// non-loopback addresses on ports 80 and 443, and returns a problem for
// each it does not refuse as an address the sandbox must not reach.
func hostVerdicts(ctx context.Context, g Guard, list func() ([]netip.Addr, error)) []string {
	if list == nil {
		list = interfaceAddrs
	}
	addrs, err := list()
	if err != nil {
		return []string{fmt.Sprintf("the host's own addresses could not be listed, so their refusal is not proved: %v", err)}
	}
	var problems []string
	for _, a := range addrs {
		if a.IsLoopback() {
			continue // refused as loopback by the ranges, and checked there
		}
		for _, port := range []uint16{80, 443} {
			t := netip.AddrPortFrom(a.WithZone(""), port).String()
			if v := g.Check(ctx, t); v.Allowed || !addressReason(v.Reason) {
				problems = append(problems, fmt.Sprintf("the egress guard does not refuse the host's own address %s (verdict %q)", t, v.Reason))
			}
		}
	}
	return problems
}

// guardVerdicts asks g about every private and port target and returns a
// problem for each one it does not refuse for the right reason.
func guardVerdicts(ctx context.Context, g Guard) []string {
	var problems []string
	for _, t := range portTargets() {
		if v := g.Check(ctx, t); v.Allowed || v.Reason != egress.ReasonPort {
			problems = append(problems, fmt.Sprintf("the egress guard does not refuse %s for its port (verdict %q)", t, v.Reason))
		}
	}
	for _, t := range privateTargets() {
		v := g.Check(ctx, t)
		switch {
		case v.Allowed:
			problems = append(problems, fmt.Sprintf("the egress guard allows %s", t))
		case !addressReason(v.Reason):
			problems = append(problems, fmt.Sprintf("the egress guard refuses %s for %q, not as a private address", t, v.Reason))
		}
	}
	return problems
}

// writeCanaries writes a canary file in a fresh subdirectory of each dir and
// returns the file paths and a cleanup.
func writeCanaries(dirs []string) ([]string, func(), error) {
	var files, made []string
	cleanup := func() {
		for _, m := range made {
			os.RemoveAll(m)
		}
	}
	for _, dir := range dirs {
		sub, err := os.MkdirTemp(dir, ".codes-sandbox-canary-")
		if err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("write canary: %w", err)
		}
		made = append(made, sub)
		f := sub + "/canary"
		if err := os.WriteFile(f, []byte("canary\n"), 0o600); err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("write canary: %w", err)
		}
		files = append(files, f)
	}
	return files, cleanup, nil
}

func trimReason(s string) string { return truncate(strings.TrimSpace(s), 480) }

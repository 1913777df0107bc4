package worker

import (
	"context"
	"crypto/x509"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/inside"
	"openvibe.network/agentsandbox/inside/bridge"
	"openvibe.network/agentsandbox/internal/imagetest"
	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/sandbox"
)

func TestMain(m *testing.M) {
	if code, ok := inside.MaybeRun(inside.Hooks{Bridge: bridge.Run}); ok {
		os.Exit(code)
	}
	code := m.Run()
	imagetest.Cleanup()
	os.Exit(code)
}

// realDeps starts a runtime with the real egress proxy (whose guard has no
// resolver: only literals, nothing is ever resolved; and knows the host's
// own addresses) in a fresh state dir, with browser sandboxes of the
// program at browser ("" for none).
func realDeps(t *testing.T, withEgress bool, browser string, mods ...func(*sandbox.Config)) Deps {
	t.Helper()
	d, _ := realStack(t, withEgress, browser, mods...)
	return d
}

// realStack is realDeps, with the runtime whose self-test's view the Deps
// hold.
func realStack(t *testing.T, withEgress bool, browser string, mods ...func(*sandbox.Config)) (Deps, *sandbox.Runtime) {
	t.Helper()
	testenv.RequireSandbox(t)
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	host, err := egress.NewHostAddrs(egress.HostAddrsConfig{Netlink: true}) // the real host's, as the worker has
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	guard := egress.NewGuard(egress.GuardConfig{Host: host})
	var att sandbox.EgressAttacher
	if withEgress {
		p, err := egress.NewProxy(egress.ProxyConfig{Guard: guard, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		att = p
	}
	// The default state dir: runtimes that share it never share a slot uid,
	// so tests of other packages running sandboxes at the same time cannot
	// be mistaken for this one's processes.
	state := sandbox.DefaultStateDir
	cfg := sandbox.Config{Capacity: 1, StateDir: state, Egress: att, Logger: log, SelfTestSlot: true, Browser: browser}
	for _, m := range mods {
		m(&cfg)
	}
	rt, err := sandbox.NewRuntime(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Errorf("close runtime: %v", err)
		}
	})
	var browsers Browsers
	if browser != "" {
		browsers = rt.SelfTest()
	}
	return Deps{
		Browser: browsers, Sandboxes: rt.SelfTest(), Guard: guard, Inspect: GlobInspector(state, rt.CgroupParents()),
		CanaryDirs: []string{t.TempDir(), t.TempDir()}, Egress: withEgress, Logger: log,
		MaxOpenFiles: sandbox.DefaultMaxOpenFiles, Secrets: []string{"secret-" + randomHex(8)},
		InetDatagramsRefused: rt.InetDatagramsRefused(),
	}, rt
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestSelfTestReal runs the self-test in a real sandbox: every check must
// pass and the facts must be provable.
func TestSelfTestReal(t *testing.T) {
	d := realDeps(t, true, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := SelfTest(ctx, d)
	t.Logf("self-test took %v", res.Duration)
	if _, ran := res.Checks[agentsandbox.CheckBrowser]; ran {
		t.Errorf("a worker without a browser ran the browser check")
	}
	if !res.Passed {
		t.Fatalf("self-test failed: %q", res.Reasons)
	}
	if !res.UserNamespace {
		t.Error("the probe did not run in its own user namespace")
	}
	if !res.Checks[agentsandbox.CheckCredentialsBrokered] {
		t.Errorf("the credential broker was not proved: %v", res.Checks)
	}
}

// TestSelfTestRealImage runs the self-test's checks in a sandbox of the
// Debian test image too: every one must pass there, and the report claims
// image sandboxes and names the image.
func TestSelfTestRealImage(t *testing.T) {
	d := realDeps(t, true, "", func(c *sandbox.Config) { c.InitBinary = imagetest.StaticInit(t) })
	released := 0
	d.Image = func(context.Context) (*sandbox.RootImage, error) {
		return &sandbox.RootImage{Ref: "registry.test/debian/python:1", Digest: "sha256:" + strings.Repeat("ab", 32),
			Layers: []string{imagetest.DebianLayer(t)}, Env: imagetest.DebianEnv(), Release: func() { released++ }}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := SelfTest(ctx, d)
	if !res.Passed || res.Image == nil || !res.Image.Passed {
		t.Fatalf("self-test failed: %q (image %+v)", res.Reasons, res.Image)
	}
	for _, c := range agentsandbox.Checks() {
		if !res.Image.Checks[c] {
			t.Errorf("check %s did not pass in the image sandbox", c)
		}
	}
	if released != 1 {
		t.Errorf("the image was released %d times, want once", released)
	}
	rep := BuildReport(Self{WorkerID: "w"}, &res, Slots{Capacity: 1}, time.Now())
	if rep.Isolation.Extra["images"] != true || rep.Isolation.Extra["images_proved_with"] != "registry.test/debian/python:1@sha256:"+strings.Repeat("ab", 32) {
		t.Errorf("the report's isolation: %v", rep.Isolation.Extra)
	}
}

// TestSelfTestRealImageUnproved: an image the probe cannot run in (no
// bash) proves nothing, so the self-test fails saying why and the report
// claims no image sandboxes.
func TestSelfTestRealImageUnproved(t *testing.T) {
	d := realDeps(t, true, "", func(c *sandbox.Config) { c.InitBinary = imagetest.StaticInit(t) })
	d.Image = func(context.Context) (*sandbox.RootImage, error) {
		return &sandbox.RootImage{Ref: "registry.test/tiny/busybox:1", Digest: "sha256:" + strings.Repeat("cd", 32),
			Layers: []string{imagetest.BusyboxLayer(t)}, Env: []string{"PATH=/bin"}}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := SelfTest(ctx, d)
	if res.Passed || res.Image == nil || res.Image.Passed || !strings.Contains(strings.Join(res.Reasons, "\n"), "in an image sandbox") {
		t.Fatalf("self-test passed %v, image %+v, reasons %q", res.Passed, res.Image, res.Reasons)
	}
	rep := BuildReport(Self{WorkerID: "w"}, &res, Slots{Capacity: 1}, time.Now())
	if _, ok := rep.Isolation.Extra["images"]; ok {
		t.Errorf("the report claims images: %v", rep.Isolation.Extra)
	}
}

// TestSelfTestRealWithoutEgress proves that a worker without its proxy
// cannot claim the egress fact, and the reason says so.
func TestSelfTestRealWithoutEgress(t *testing.T) {
	d := realDeps(t, false, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := SelfTest(ctx, d)
	if res.Passed || res.Checks[agentsandbox.CheckEgressRefusesPrivate] {
		t.Fatalf("self-test passed without egress: %+v", res)
	}
	for _, c := range agentsandbox.Checks() {
		if c != agentsandbox.CheckEgressRefusesPrivate && !res.Checks[c] {
			t.Errorf("check %s failed: %q", c, res.Reasons)
		}
	}
	if !strings.Contains(strings.Join(res.Reasons, " "), "no egress proxy") {
		t.Errorf("reasons %q", res.Reasons)
	}
}

// TestSelfTestRealBrowser runs the self-test on a worker with a browser:
// the browser check passes with Debian's Chromium, and fails, saying why,
// with a "browser" that is no browser (it exits at once).
func TestSelfTestRealBrowser(t *testing.T) {
	chromium := sandbox.FindBrowser()
	if chromium == "" {
		testenv.Missing(t, "Chromium is not installed: apt-get install -y chromium")
	}
	tests := []struct {
		name, browser, wantReason string
	}{
		{"Chromium", chromium, ""},
		{"NotABrowser", "/usr/bin/true", "browser: Chromium did not open a page"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := realDeps(t, true, tc.browser)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res := SelfTest(ctx, d)
			t.Logf("self-test took %v", res.Duration)
			passed, ran := res.Checks[agentsandbox.CheckBrowser]
			reasons := strings.Join(res.Reasons, "; ")
			switch {
			case !ran:
				t.Fatalf("the browser check did not run: %s", reasons)
			case tc.wantReason == "" && (!passed || !res.Passed):
				t.Fatalf("self-test failed: %s", reasons)
			case tc.wantReason != "" && (passed || res.Passed || !strings.Contains(reasons, tc.wantReason)):
				t.Fatalf("browser check passed %v, reasons %q; want it failed with %q", passed, reasons, tc.wantReason)
			}
			for _, c := range agentsandbox.Checks() {
				if !res.Checks[c] {
					t.Errorf("check %s failed beside the browser's: %s", c, reasons)
				}
			}
		})
	}
}

// brokerFault is a runtime whose probe sandbox's broker is broken on
// purpose: fault changes the options the self-test creates it with.
type brokerFault struct {
	Sandboxes
	fault func(*sandbox.Options)
}

func (b brokerFault) Create(ctx context.Context, opts sandbox.Options) (sandbox.Info, error) {
	if len(opts.Secrets) > 0 {
		b.fault(&opts)
	}
	return b.Sandboxes.Create(ctx, opts)
}

// TestSelfTestRealBrokerBroken breaks the credential broker of the probe
// sandbox one way at a time: credentials_brokered must fail, saying why,
// and every other check pass. (Before the TLS canary, a broker that put
// in a wrong value passed.)
func TestSelfTestRealBrokerBroken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fault  func(*sandbox.Options)
		reason string
	}{
		{"WrongValue", func(o *sandbox.Options) {
			s := o.Secrets[probeSecret]
			s.Value = "not-the-probe-value"
			o.Secrets = map[string]agentsandbox.Secret{probeSecret: s}
		}, "not exactly the probe secret's"},
		{"CanaryNotTrusted", func(o *sandbox.Options) {
			if o.EgressCanary != nil {
				c := *o.EgressCanary
				c.Roots = x509.NewCertPool()
				o.EgressCanary = &c
			}
		}, "received no request"},
		{"NotIntercepted", func(o *sandbox.Options) {
			s := o.Secrets[probeSecret]
			s.Hosts = []string{"elsewhere.invalid"}
			o.Secrets = map[string]agentsandbox.Secret{probeSecret: s}
		}, "received no request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := realDeps(t, true, "")
			d.Sandboxes = brokerFault{Sandboxes: d.Sandboxes, fault: tc.fault}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res := SelfTest(ctx, d)
			ok, ran := res.Checks[agentsandbox.CheckCredentialsBrokered]
			if res.Passed || !ran || ok {
				t.Fatalf("self-test passed %v, credentials_brokered ran %v passed %v: %q", res.Passed, ran, ok, res.Reasons)
			}
			if why := strings.Join(res.Reasons, "\n"); !strings.Contains(why, tc.reason) {
				t.Errorf("reasons %q do not say %q", res.Reasons, tc.reason)
			}
			for _, c := range agentsandbox.Checks() {
				if !res.Checks[c] {
					t.Errorf("check %s failed: %q", c, res.Reasons)
				}
			}
		})
	}
}

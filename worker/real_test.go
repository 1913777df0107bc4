package worker

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/inside"
	"openvibe.network/agentsandbox/inside/bridge"
	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/sandbox"
)

func TestMain(m *testing.M) {
	if code, ok := inside.MaybeRun(inside.Hooks{Bridge: bridge.Run}); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// realDeps starts a runtime with the real egress proxy (whose guard has no
// resolver: only literals, nothing is ever resolved; and knows the host's
// own addresses) in a fresh state dir, with browser sandboxes of the
// program at browser ("" for none).
func realDeps(t *testing.T, withEgress bool, browser string) Deps {
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
	rt, err := sandbox.NewRuntime(sandbox.Config{Capacity: 1, StateDir: state, Egress: att, Logger: log, SelfTestSlot: true, Browser: browser})
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
		browsers = rt
	}
	return Deps{
		Browser: browsers, Sandboxes: rt, Guard: guard, Inspect: GlobInspector(state, rt.CgroupParents()),
		CanaryDirs: []string{t.TempDir(), t.TempDir()}, Egress: withEgress, Logger: log,
		MaxOpenFiles: sandbox.DefaultMaxOpenFiles, Secrets: []string{"secret-" + randomHex(8)},
	}
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

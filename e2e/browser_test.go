package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"
	"github.com/miekg/dns"
	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/inside/bridge"
	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/sandbox/control"
)

// browserWait bounds each browser step (Chromium starts in about a second
// here; a loaded machine takes longer).
const browserWait = 2 * time.Minute

// requireChromium skips or fails (see testenv.Missing) unless the host has
// Chromium.
func requireChromium(t *testing.T) {
	t.Helper()
	if sandbox.FindBrowser() == "" {
		testenv.Missing(t, "Chromium is not installed: apt-get install -y chromium")
	}
}

// startBrowserWorker starts Live and a worker with the browser on, and
// returns once the owner's view says alive: Live's URL, the world, the
// worker and its API's URL. Chromium asks for names of its own (updates):
// the worker's proxy asks a resolver on loopback that knows none, never the
// system's.
func startBrowserWorker(t *testing.T) (string, world, *proc, string) {
	t.Helper()
	bin := binaries(t)
	live, w := startLive(t, bin)
	wp, api := startWorker(t, bin, live, w, "--browser", "on", "--checkin-interval", "10m", "--egress-resolver", nxResolver(t))
	waitFor(t, "the owner's view to say alive", func() bool { return view(t, live, w).State == "alive" }, wp)
	return live, w, wp, api
}

// drive connects chromedp to sandbox sb's browser through the worker API,
// as a user would (the URL and the Authorization header), and returns its
// context.
func drive(t *testing.T, wc *client.Worker, sb *client.Sandbox) context.Context {
	t.Helper()
	actx, cancel := remote.NewAllocator(context.Background(), sb.BrowserURL(), remote.NoModifyURL,
		remote.WithDialHTTPHeader(wc.BrowserHeader()))
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	// The first run connects, for the context's whole life (a timeout on
	// it would end the connection).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("connect to the browser of %s: %v", sb.ID(), err)
	}
	return ctx
}

// servePage starts the init's tiny page server in sb on its own loopback.
func servePage(ctx context.Context, t *testing.T, sb *client.Sandbox, text string) {
	t.Helper()
	if _, err := sb.Start(ctx, client.ExecRequest{Argv: []string{control.InitPath, control.ServeMarker, "127.0.0.1:8000", text}}); err != nil {
		t.Fatalf("start the page server: %v", err)
	}
}

// navigate loads url in ctx's page, retrying while the page server starts.
func navigate(ctx context.Context, t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(browserWait)
	for {
		rctx, cancel := context.WithTimeout(ctx, browserWait)
		err := chromedp.Do(rctx, chromedp.Navigate(url))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("navigate to %s: %v", url, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestBrowserThroughWorker drives real sandboxes' headless browsers through
// the worker API with chromedp: the worker proves its browser before it
// claims one; a page served inside the sandbox loads, reads back and
// screenshots; the browser is headless Chromium; a request for a canary on
// the host's loopback, direct or through the proxy, never reaches it; one
// connection per sandbox; two browser sandboxes see neither the other's
// pages nor its profile; a page past the memory limit is killed, counted,
// and neither the worker nor the browser's next connection suffers; the
// wipe takes the profile.
func TestBrowserThroughWorker(t *testing.T) {
	requireChromium(t)
	live, w, wp, api := startBrowserWorker(t)
	v := view(t, live, w)
	var rep struct {
		Browser bool            `json:"browser"`
		Checks  map[string]bool `json:"checks"`
	}
	if err := json.Unmarshal(v.Report, &rep); err != nil || !rep.Browser || !rep.Checks["browser"] {
		t.Fatalf("report: browser %v, checks %v (%v)", rep.Browser, rep.Checks, err)
	}

	canary, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer canary.Close()
	var reached atomic.Int64
	go func() {
		for {
			c, err := canary.Accept()
			if err != nil {
				return
			}
			reached.Add(1)
			c.Close()
		}
	}()

	wc := client.NewWorker(api, "e2e-api-token", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*browserWait)
	defer cancel()
	if _, err := wc.Create(ctx, client.CreateOptions{Browser: true, Limits: client.RequestLimits{MemoryMB: 256}}); !errors.Is(err, client.ErrInvalidRequest) ||
		!strings.Contains(err.Error(), "a browser sandbox needs at least 512") {
		t.Errorf("a browser sandbox of 256 MB: %v, want a 400 that names the minimum", err)
	}
	info, err := wc.Create(ctx, client.CreateOptions{Browser: true, StartBrowser: true, Limits: client.RequestLimits{MemoryMB: 512}})
	if err != nil {
		t.Fatalf("create a browser sandbox: %v", err)
	}
	if !info.Browser {
		t.Errorf("create's answer: browser false")
	}
	sb := wc.Sandbox(info.ID)
	other, err := wc.Create(ctx, client.CreateOptions{Browser: true, Limits: client.RequestLimits{MemoryMB: 512}})
	if err != nil {
		t.Fatalf("create a second browser sandbox: %v", err)
	}
	ob := wc.Sandbox(other.ID)
	defer func() { _, _ = ob.Delete(context.Background()) }()

	ver, err := sb.BrowserVersion(ctx)
	if err != nil || ver.WebSocketDebuggerURL != sb.BrowserURL() || !strings.Contains(ver.UserAgent, "HeadlessChrome") {
		t.Fatalf("json/version: %+v %v (want the URL %s)", ver, err, sb.BrowserURL())
	}

	servePage(ctx, t, sb, "hello from sandbox A")
	bctx := drive(t, wc, sb)
	navigate(bctx, t, "http://127.0.0.1:8000/")
	text, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#text")))
	if err != nil {
		t.Fatalf("read the page: %v", err)
	}
	webdriver, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`navigator.webdriver`))
	if err != nil {
		t.Fatalf("navigator.webdriver: %v", err)
	}
	ua, err := chromedp.Run(bctx, chromedp.Evaluate[string](`navigator.userAgent`))
	if err != nil {
		t.Fatalf("navigator.userAgent: %v", err)
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if text != "hello from sandbox A" || !webdriver || !strings.Contains(ua, "HeadlessChrome") {
		t.Errorf("page text %q, navigator.webdriver %v, user agent %q", text, webdriver, ua)
	}
	checkScreenshot(t, shot)

	// One connection per sandbox: the worker refuses a second one.
	if _, err := sb.BrowserVersion(ctx); !errors.Is(err, client.ErrBrowserBusy) {
		t.Errorf("json/version while chromedp is connected: %v, want ErrBrowserBusy", err)
	}

	// The host's canary, direct (the sandbox's own loopback has nothing
	// there) and through the proxy (a context that bypasses it for nothing).
	canaryURL := "http://" + canary.Addr().String() + "/"
	if err := chromedp.Do(bctx, chromedp.Navigate(canaryURL)); err == nil {
		t.Errorf("a direct navigation to the host's canary %s did not fail", canaryURL)
	}
	disposeOnDetach := true
	bcx, err := chromedp.CallBrowser(bctx, target.CreateBrowserContext, target.CreateBrowserContextParams{
		ProxyServer: "http://" + bridge.BridgeAddr, ProxyBypassList: "<-loopback>", DisposeOnDetach: &disposeOnDetach,
	})
	if err != nil {
		t.Fatalf("a browser context through the proxy: %v", err)
	}
	pctx, pcancel := chromedp.NewContext(bctx, chromedp.WithExistingBrowserContext(bcx.BrowserContextID))
	defer pcancel()
	if err := chromedp.Do(pctx, chromedp.Navigate(canaryURL)); err != nil {
		t.Fatalf("navigate through the proxy: %v", err)
	}
	refused, err := chromedp.Run(pctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatalf("read the proxy's answer: %v", err)
	}
	if !strings.Contains(refused, "egress refused") {
		t.Errorf("the proxy's answer for the canary: %q, want its refusal", refused)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the host's canary saw %d connection(s) from the browser", n)
	}

	// The other sandbox's browser sees nothing of this one: not its page
	// (another network namespace) nor its profile (another tmpfs).
	octx := drive(t, wc, ob)
	if err := chromedp.Do(octx, chromedp.Navigate("http://127.0.0.1:8000/")); err == nil {
		t.Errorf("sandbox B's browser loaded a page at sandbox A's address")
	}
	var out bytes.Buffer
	res, err := ob.Exec(ctx, client.ExecRequest{Argv: []string{"sh", "-c", "grep -rl 'sandbox A' " + sandbox.BrowserProfile + " /tmp /workspace; ls -d " + sandbox.BrowserProfile}}, &out, &out)
	if err != nil || strings.Contains(out.String(), "sandbox A") || !strings.Contains(out.String(), sandbox.BrowserProfile) {
		t.Errorf("sandbox B's files: %q (%+v, %v)", out.String(), res, err)
	}

	// A page past the memory limit is killed (the sandbox counts it); the
	// worker and the browser's next page are fine.
	mctx, mcancel := context.WithTimeout(octx, browserWait)
	defer mcancel()
	go func() { // ends when its renderer is killed or at mctx's end
		_, _ = chromedp.Run(mctx, chromedp.Evaluate[int](`(() => { const a = []; for (;;) { a.push(new Float64Array(1 << 24).fill(1)); } })()`))
	}()
	waitFor(t, "the memory limit to kill the page", func() bool {
		u, err := ob.Usage(ctx)
		return err == nil && u.OOMKills > 0
	}, wp)
	mcancel()
	if _, err := wc.Status(ctx); err != nil {
		t.Errorf("the worker after a browser ran out of memory: %v", err)
	}
	nctx, ncancel := chromedp.NewContext(octx)
	defer ncancel()
	if err := chromedp.Do(nctx, chromedp.Navigate("about:blank")); err != nil {
		t.Errorf("a new page after the memory limit killed one: %v", err)
	}

	// The wipe takes the profile with the sandbox.
	wr, err := sb.Delete(ctx)
	if err != nil || !wr.Verified {
		t.Fatalf("delete: %+v %v", wr, err)
	}
	if traces := sandboxTraces(info.ID); len(traces) != 0 {
		t.Errorf("left after the wipe: %v", traces)
	}
}

// nxResolver serves DNS on loopback, answering every query that the name
// does not exist, and returns its address.
func nxResolver(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeNameError)
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

// checkScreenshot decodes a PNG screenshot and fails unless it shows more
// than one colour.
func checkScreenshot(t *testing.T, shot []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	b := img.Bounds()
	first := img.At(b.Min.X, b.Min.Y)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if img.At(x, y) != first {
				return
			}
		}
	}
	t.Errorf("the %dx%d screenshot is blank", b.Dx(), b.Dy())
}

// TestSelftestBrowser: `codes-sandbox selftest --browser on` runs the
// browser check beside the nine (and credentials_brokered) and passes.
func TestSelftestBrowser(t *testing.T) {
	requireChromium(t)
	bin := binaries(t)
	out, err := exec.Command(filepath.Join(bin, "codes-sandbox"), "selftest", "--json", "--browser", "on").Output()
	if err != nil {
		t.Fatalf("selftest: %v (%s)", err, out)
	}
	var res struct {
		Checks map[string]bool `json:"checks"`
		Passed bool            `json:"passed"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !res.Passed || !res.Checks["browser"] || !res.Checks["credentials_brokered"] || len(res.Checks) != 11 {
		t.Fatalf("result %s", out)
	}
}

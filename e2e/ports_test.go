package e2e

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/sandbox"
)

// hostChromium starts the host's headless Chromium (not a sandbox's: a
// person's browser) with a fresh profile and returns a tab. Every name but
// those under localhost fails to resolve (Chromium resolves those to
// loopback itself), and nothing talks to the network on its own.
func hostChromium(t *testing.T) context.Context {
	t.Helper()
	path := sandbox.FindBrowser()
	if path == "" {
		testenv.Missing(t, "Chromium is not installed: apt-get install -y chromium")
	}
	alloc, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-features", "DnsOverHttps,AsyncDns,MediaRouter,OptimizationHints,Translate"),
		chromedp.Flag("host-resolver-rules", "MAP *.localhost 127.0.0.1, MAP * ~NOTFOUND"),
		chromedp.UserDataDir(t.TempDir()),
	)
	t.Cleanup(cancel)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(cancelTab)
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return tab
}

// TestPortsPreview runs a web app in a real sandbox of a worker started with
// --preview-listen and opens it as a person would: a preview URL loads in
// the host's headless Chromium, the token leaves the address for a cookie
// the page's script cannot read, the page's WebSocket gets its echo; the
// preview dies with the sandbox. From inside the sandbox, neither the API's
// listener nor the previews' is reachable, directly or through the proxy.
func TestPortsPreview(t *testing.T) {
	bin := binaries(t)
	live, w := startLive(t, bin)
	_, api := startWorker(t, bin, live, w, "--preview-listen", "127.0.0.1:0", "--egress-resolver", nxResolver(t))
	tab := hostChromium(t)
	wc := client.NewWorker(api, "e2e-api-token", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	info, err := wc.Create(ctx, client.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	sb := wc.Sandbox(info.ID)
	defer func() { _, _ = sb.Delete(context.Background()) }()
	src, err := os.ReadFile("../scripts/ports/app.py")
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Files().Put(ctx, "app.py", bytes.NewReader(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Start(ctx, client.ExecRequest{Argv: []string{"python3", "app.py", "8000", "hello, preview"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the app to answer through the API", func() bool {
		req, _ := http.NewRequestWithContext(ctx, "GET", sb.PortURL(8000)+"small", nil)
		req.Header = wc.PortHeader()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, nil)

	p, err := sb.Preview(ctx, 8000, 10*time.Minute)
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	if want := "http://8000-" + info.ID + ".localhost:"; !strings.HasPrefix(p.Origin, want) {
		t.Fatalf("preview origin %q, want %s…", p.Origin, want)
	}
	if err := chromedp.Do(tab, chromedp.Navigate(p.URL)); err != nil {
		t.Fatalf("open the preview: %v", err)
	}
	deadline := time.Now().Add(wait)
	for {
		echo, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#echo")))
		if err == nil && echo == "hello from the page" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page's WebSocket echo: %q %v", echo, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	text, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#text")))
	if err != nil || text != "hello, preview" {
		t.Fatalf("the page's text: %q %v", text, err)
	}
	where, err := chromedp.Run(tab, chromedp.Evaluate[string](`location.href + " cookies:" + document.cookie`))
	if err != nil || where != p.Origin+"/ cookies:" {
		t.Fatalf("the page is at %q (%v), want %s/ without the token and no cookie its script can read", where, err, p.Origin)
	}

	t.Run("ListenersUnreachableFromInside", func(t *testing.T) {
		apiPort, previewPort := portOf(t, api), portOf(t, p.Origin)
		connect := `import socket, sys
s = socket.socket()
s.settimeout(10)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
    print("reached")
except OSError:
    print("refused")`
		proxied := `curl -sS -o /dev/null --max-time 20 --noproxy '' -x "$HTTP_PROXY" `
		for _, tc := range []struct{ name, script, want string }{
			{"APIDirect", "python3 -c '" + connect + "' " + apiPort, "refused\n"},
			{"PreviewDirect", "python3 -c '" + connect + "' " + previewPort, "refused\n"},
			{"APIThroughProxy", proxied + "-w '%{http_code}' http://127.0.0.1:" + apiPort + "/v1/status", "403"},
			{"PreviewThroughProxy", proxied + "-w '%{http_code}' " + p.URL, "403"},
			{"APITunnel", proxied + "-p -w '%{http_connect}' http://127.0.0.1:" + apiPort + "/v1/status 2>/dev/null", "403"},
			{"PreviewTunnel", proxied + "-p -w '%{http_connect}' " + p.Origin + "/ 2>/dev/null", "403"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if out := sh(ctx, t, sb, tc.script+"; true"); out != tc.want {
					t.Fatalf("%s:\n%q, want %q", tc.script, out, tc.want)
				}
			})
		}
	})

	if _, err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	// The preview's host name is not looked up: the client dials the
	// listener.
	previewAddr := "127.0.0.1:" + portOf(t, p.Origin)
	hc := &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, previewAddr)
		}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := hc.Get(p.URL)
	if err != nil {
		t.Fatalf("the preview after its sandbox's delete: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(body), "is gone") {
		t.Fatalf("the preview after its sandbox's delete: %d %s", resp.StatusCode, body)
	}
}

// portOf is the port of a URL.
func portOf(t *testing.T, u string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil || pu.Port() == "" {
		t.Fatalf("no port in %q (%v)", u, err)
	}
	return pu.Port()
}

// sh runs a shell script in sb and returns its output (both streams).
func sh(ctx context.Context, t *testing.T, sb *client.Sandbox, script string) string {
	t.Helper()
	var out bytes.Buffer
	if _, err := sb.Run(ctx, client.ExecRequest{Argv: []string{"sh", "-c", script}}, nil, &out, &out); err != nil {
		t.Fatalf("exec: %v", err)
	}
	return out.String()
}

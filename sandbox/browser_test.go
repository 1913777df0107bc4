package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/cdp"
	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/sandbox/control"
)

// requireBrowser returns the host's Chromium, or skips or fails (see
// testenv.Missing).
func requireBrowser(tb testing.TB) string {
	tb.Helper()
	p := FindBrowser()
	if p == "" {
		testenv.Missing(tb, "Chromium is not installed: apt-get install -y chromium")
	}
	return p
}

// TestBrowser starts the headless browser of a real sandbox, loads a page
// served on the sandbox's own loopback through it and reads the page back
// over the DevTools protocol; a second connection is refused while the
// first is open, and the browser is one of the sandbox's processes.
func TestBrowser(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1, Browser: requireBrowser(t)})
	info := newBox(t, rt, Options{Browser: true})
	if !info.Browser {
		t.Errorf("Info.Browser = false for a browser sandbox")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	srv, err := rt.Start(ctx, info.ID, agentsandbox.ExecRequest{Argv: []string{control.InitPath, control.ServeMarker, "127.0.0.1:8000", "hello from the sandbox"}})
	if err != nil {
		t.Fatalf("start the page server: %v", err)
	}
	bc, err := rt.Browser(ctx, info.ID)
	if err != nil {
		t.Fatalf("Browser: %v", err)
	}
	defer bc.Close()
	if _, err := rt.Browser(ctx, info.ID); !errors.Is(err, ErrBrowserBusy) {
		t.Errorf("a second connection: err %v, want ErrBrowserBusy", err)
	}
	c := cdp.New(bc)
	v, err := c.GetVersion()
	if err != nil {
		t.Fatalf("GetVersion: %v", err)
	}
	if !strings.Contains(v.UserAgent, "HeadlessChrome") {
		t.Errorf("user agent %q is not headless Chromium's", v.UserAgent)
	}
	page, err := c.NewPage("")
	if err != nil {
		t.Fatalf("NewPage: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; { // the server may still be starting
		errText, err := page.Navigate("http://127.0.0.1:8000/")
		if err != nil {
			t.Fatalf("Navigate: %v", err)
		}
		if errText == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page did not load: %s", errText)
		}
		time.Sleep(200 * time.Millisecond)
	}
	text, err := page.Text()
	if err != nil {
		t.Fatalf("Text: %v", err)
	}
	if text != "hello from the sandbox" {
		t.Errorf("page text %q", text)
	}
	ps, err := rt.Processes(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range ps {
		found = found || (p.Pid == bc.Pid && p.Running && p.Background)
	}
	if !found || srv.Pid == bc.Pid {
		t.Errorf("browser pid %d not among the running processes %+v", bc.Pid, ps)
	}

	// The browser outlives its connection: the next one, and a start, find
	// the same process.
	bc.Close()
	again, err := rt.Browser(ctx, info.ID)
	if err != nil {
		t.Fatalf("Browser again: %v", err)
	}
	defer again.Close()
	if p, err := rt.StartBrowser(ctx, info.ID); err != nil || again.Pid != bc.Pid || p.Pid != bc.Pid {
		t.Errorf("pids after reconnecting: %d, start %d (%v); want %d", again.Pid, p.Pid, err, bc.Pid)
	}
	// A browser that ends ends its connection with its exit; the next
	// connection starts a new one.
	if err := rt.Signal(ctx, info.ID, bc.Pid, "KILL"); err != nil {
		t.Fatal(err)
	}
	var ended *BrowserEndedError
	for {
		if _, err = again.Next(); err != nil {
			break
		}
	}
	if !errors.As(err, &ended) || ended.ExitCode != 128+9 {
		t.Errorf("Next after the browser was killed: %v, want a *BrowserEndedError with exit 137", err)
	}
	fresh, err := rt.Browser(ctx, info.ID)
	if err != nil {
		t.Fatalf("Browser after its end: %v", err)
	}
	defer fresh.Close()
	if _, err := cdp.New(fresh).GetVersion(); err != nil || fresh.Pid == bc.Pid {
		t.Errorf("the new browser: pid %d (old %d), %v", fresh.Pid, bc.Pid, err)
	}
}

// TestBrowserRefused: a browser sandbox needs a runtime with a browser and
// limits that hold it, and only a browser sandbox has one.
func TestBrowserRefused(t *testing.T) {
	chromium := requireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	without := newRuntime(t, Config{Capacity: 1})
	if _, err := without.Create(ctx, Options{Browser: true}); !errors.Is(err, ErrNoBrowser) {
		t.Errorf("a browser sandbox on a runtime without a browser: %v, want ErrNoBrowser", err)
	}
	rt := newRuntime(t, Config{Capacity: 1, Browser: chromium})
	_, err := rt.Create(ctx, Options{Browser: true, Limits: agentsandbox.Limits{MemoryMB: 256}})
	var le *agentsandbox.LimitError
	if !errors.As(err, &le) || *le != (agentsandbox.LimitError{Field: "memory_mb", Value: 256, Min: agentsandbox.MinBrowserMemoryMB, Browser: true}) {
		t.Errorf("a browser sandbox of 256 MB: %v", err)
	}
	info := newBox(t, rt, Options{})
	if _, err := rt.Browser(ctx, info.ID); !errors.Is(err, ErrNoBrowser) {
		t.Errorf("the browser of a sandbox without one: %v, want ErrNoBrowser", err)
	}
	if _, err := rt.StartBrowser(ctx, info.ID); !errors.Is(err, ErrNoBrowser) {
		t.Errorf("starting the browser of a sandbox without one: %v, want ErrNoBrowser", err)
	}
}

// TestCheckBrowserPath: the browser must be a program under /usr, the only
// host tree a sandbox sees.
func TestCheckBrowserPath(t *testing.T) {
	tests := []struct {
		path    string
		wantErr string
	}{
		{"", ""},
		{"/usr/bin/sh", ""},
		{"/opt/google/chrome/chrome", "give an absolute path under /usr"},
		{"usr/bin/chromium", "give an absolute path under /usr"},
		{"/usr/../etc/passwd", "give an absolute path under /usr"},
		{"/usr/share", "is not an executable file"},
		{"/usr/no-such-browser", "no such file"},
	}
	for _, tc := range tests {
		err := checkBrowserPath(tc.path)
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("checkBrowserPath(%q) = %v, want %q", tc.path, err, tc.wantErr)
		}
	}
}

// TestBrowserSandboxIsolation runs the escape battery's checks in a browser
// sandbox whose browser runs: every one of its processes, Chromium's
// included, has no capability, no new privileges and the seccomp filter;
// it sees only loopback and no host profile (/etc/chromium.d holds only the
// sandbox's own files); namespaces stay refused; and
// on the host every process runs as the sandbox's unprivileged uid.
func TestBrowserSandboxIsolation(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1, Browser: requireBrowser(t)})
	info := newBox(t, rt, Options{Browser: true})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	bc, err := rt.Browser(ctx, info.ID)
	if err != nil {
		t.Fatalf("Browser: %v", err)
	}
	defer bc.Close()
	page, err := cdp.New(bc).NewPage("") // a renderer, too
	if err != nil {
		t.Fatal(err)
	}
	if _, err := page.Navigate("about:blank"); err != nil {
		t.Fatal(err)
	}
	out := shOK(t, rt, info.ID, `n=0
for s in /proc/[0-9]*/status; do
	n=$((n + 1))
	while read -r k v; do case $k in
		CapInh:|CapPrm:|CapEff:|CapBnd:|CapAmb:) [ "$v" = 0000000000000000 ] || echo "BAD $s $k $v" ;;
		NoNewPrivs:) [ "$v" = 1 ] || echo "BAD $s $k $v" ;;
		Seccomp:) [ "$v" = 2 ] || echo "BAD $s $k $v" ;;
	esac; done < "$s"
done
echo "processes $n"
tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '
for p in /root/.config /home/*/.config /run/user /etc/chromium /var/lib; do [ -e "$p" ] && echo "BAD visible $p"; done
ls -A /etc/chromium.d | grep -vxE '`+strings.Join(slices.Sorted(maps.Keys(ChromiumConfig)), "|")+`' | sed 's/^/BAD not the sandbox'"'"'s own: \/etc\/chromium.d\//' 
for c in "unshare -U true" "unshare -n true" "unshare -m true"; do $c 2>/dev/null && echo "BAD $c"; done
ls -d `+BrowserProfile+`
true`)
	if strings.Contains(out, "BAD") || !strings.Contains(out, "\nlo\n") || !strings.Contains(out, BrowserProfile) {
		t.Fatalf("the browser sandbox's battery:\n%s", out)
	}
	var n int
	if _, err := fmt.Sscanf(out[strings.Index(out, "processes "):], "processes %d", &n); err != nil || n < 4 {
		t.Fatalf("only %d processes seen (%v): is the browser running?\n%s", n, err, out)
	}
	pids, err := rt.HostPids(info.ID)
	if err != nil || len(pids) < n {
		t.Fatalf("host pids %v (%v), want at least %d", pids, err, n)
	}
	for _, pid := range pids {
		if uid, err := hostUIDOf(pid); err != nil || uid != info.HostUID {
			t.Errorf("host pid %d runs as uid %d (%v), want %d", pid, uid, err, info.HostUID)
		}
	}
}

// TestChromiumOnPath: an agent that launches the browser itself finds a
// working `chromium` on a browser sandbox's PATH: Debian's launcher
// (/usr/bin/chromium, a shell script that sources /etc/chromium.d/*) runs
// and Chromium prints a page's DOM, with no flag beyond --headless (the
// sandbox's own /etc/chromium.d adds what the sandbox needs: ChromiumConfig);
// that directory holds nothing of the host's.
func TestChromiumOnPath(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1, Browser: requireBrowser(t)})
	info := newBox(t, rt, Options{Browser: true})
	const page = "<p>hello from chromium on the PATH</p>"
	out := shOK(t, rt, info.ID, `ls /etc/chromium.d; command -v chromium; `+
		`chromium --headless --dump-dom 'data:text/html,`+page+`' 2>/dev/null`)
	if !strings.Contains(out, page) {
		t.Fatalf("chromium --dump-dom did not print the page's DOM:\n%s", out)
	}
	for _, host := range []string{"apikeys", "default-flags", "extensions"} {
		if strings.Contains(out, host+"\n") {
			t.Errorf("the sandbox sees the host's /etc/chromium.d/%s:\n%s", host, out)
		}
	}
}

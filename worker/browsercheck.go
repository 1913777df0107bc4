package worker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/inside/bridge"
	"openvibe.network/agentsandbox/internal/cdp"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/sandbox/control"
)

// Browsers is what the self-test's browser check needs of a runtime beyond
// Sandboxes; *sandbox.Runtime implements it.
type Browsers interface {
	Start(ctx context.Context, id string, req agentsandbox.ExecRequest) (sandbox.Process, error)
	Browser(ctx context.Context, id string) (*sandbox.BrowserConn, error)
}

// browserProbeLimits are the limits of the browser check's sandbox: a
// browser sandbox's minimums.
func browserProbeLimits() agentsandbox.Limits {
	return agentsandbox.Limits{MemoryMB: agentsandbox.MinBrowserMemoryMB, DiskMB: agentsandbox.MinBrowserDiskMB,
		Pids: agentsandbox.MinBrowserPids, CPUPercent: 100}
}

// browserCheckPolicy is the egress policy of the browser check's sandbox:
// an allow list of one name that does not exist, so that the proxy refuses
// every request (Chromium's own background ones too) by its name, before
// any lookup: the check never sends a query or a connection past the host.
func browserCheckPolicy() agentsandbox.EgressPolicy {
	return agentsandbox.EgressPolicy{Mode: agentsandbox.EgressAllow, Allow: agentsandbox.EgressHosts("browser-check.invalid")}
}

// browserPageAddr is where the check's page is served, on the sandbox's own
// loopback.
const browserPageAddr = "127.0.0.1:8000"

// browserCheckTimeout bounds the whole browser check (Chromium's start is
// about a second on a real host; an emulated or loaded one takes longer).
const browserCheckTimeout = 90 * time.Second

// hostProfileProbe lists, inside the browser's sandbox, the host's browser
// and desktop profile places that must not be there, and every entry of
// /etc/chromium.d that is not one of the sandbox's own (sandbox.
// ChromiumConfig, whose README names codes-sandbox).
func hostProfileProbe() string {
	return `for p in /root/.config /root/.cache /home/*/.config /home/*/.mozilla /run/user /etc/chromium; do
	[ -e "$p" ] && echo "present $p"
done
for p in /etc/chromium.d/* /etc/chromium.d/.[!.]*; do
	[ -e "$p" ] || continue
	case "${p##*/}" in ` + strings.Join(slices.Sorted(maps.Keys(sandbox.ChromiumConfig)), "|") + `) ;; *) echo "present $p" ;; esac
done
grep -q codes-sandbox /etc/chromium.d/README 2>/dev/null || echo "present /etc/chromium.d/README (not the sandbox's own)"
echo "profile $(readlink -f ` + sandbox.BrowserProfile + ` 2>/dev/null || echo ` + sandbox.BrowserProfile + `)"`
}

// observeBrowser runs the browser check in a browser sandbox of its own
// (the self-test's slot, after the probe's sandbox is gone, under
// browserCheckPolicy): Chromium loads a page served on the sandbox's own
// loopback and the check reads its text back over CDP; Chromium's request
// for the host's canary, sent through the proxy (a browser context whose
// proxy bypasses nothing, not even loopback), is refused by the proxy, and
// its direct one fails; no host profile place is visible; the wipe is
// verified. It returns why the check failed ("" when
// it passed) or, when it could not run, notRun.
func observeBrowser(ctx context.Context, d Deps, obs *observation) (why, notRun string) {
	ctx, cancel := context.WithTimeout(ctx, browserCheckTimeout)
	defer cancel()
	info, err := d.Sandboxes.Create(ctx, sandbox.Options{
		TimeBox: agentsandbox.DefaultTimeBox, Limits: browserProbeLimits(), Egress: d.Egress, SelfTest: true, Browser: true,
		EgressPolicy: browserCheckPolicy(),
	})
	if err != nil {
		return "", fmt.Sprintf("cannot create the browser's sandbox: %v", err)
	}
	defer func() {
		rep, err := d.Sandboxes.Delete(context.WithoutCancel(ctx), info.ID)
		switch {
		case err != nil && why == "" && notRun == "":
			why = fmt.Sprintf("the browser's sandbox could not be wiped: %v", err)
		case err == nil && !rep.Verified && why == "" && notRun == "":
			why = fmt.Sprintf("the browser's sandbox's wipe left %s", strings.Join(rep.Leftovers, ", "))
		}
	}()
	var out lockedWriter
	out.limit = 64 << 10
	res, err := d.Sandboxes.Exec(ctx, info.ID, agentsandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", hostProfileProbe()}, Timeout: probeTimeout}, &out, &out)
	if err != nil || res.ExitCode != 0 {
		return "", fmt.Sprintf("cannot look for host profiles in the browser's sandbox: %v (exit %d)", err, res.ExitCode)
	}
	for _, l := range strings.Split(out.buf.String(), "\n") {
		if p, ok := strings.CutPrefix(l, "present "); ok {
			return fmt.Sprintf("the browser's sandbox sees the host's profile place %s", p), ""
		}
		if p, ok := strings.CutPrefix(l, "profile "); ok && p != sandbox.BrowserProfile {
			return fmt.Sprintf("the browser's profile %s is not its own in the sandbox's tmpfs", p), ""
		}
	}
	token := "page-" + randomHex(8)
	if _, err := d.Browser.Start(ctx, info.ID, agentsandbox.ExecRequest{Argv: []string{control.InitPath, control.ServeMarker, browserPageAddr, token}}); err != nil {
		return "", fmt.Sprintf("cannot start the page server in the browser's sandbox: %v", err)
	}
	bc, err := d.Browser.Browser(ctx, info.ID)
	if err != nil {
		return fmt.Sprintf("Chromium did not start in a sandbox: %v", err), ""
	}
	stop := context.AfterFunc(ctx, func() { bc.Close() })
	defer stop()
	defer bc.Close()
	c := cdp.New(bc)
	page, err := c.NewPage("")
	if err != nil {
		return fmt.Sprintf("Chromium did not open a page: %v", err), ""
	}
	var errText string
	for {
		errText, err = page.Navigate("http://" + browserPageAddr + "/")
		if err != nil || errText == "" || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond) // the page server may still be starting
	}
	if err != nil || errText != "" {
		return fmt.Sprintf("Chromium did not load a page served inside its sandbox: %v%s", err, errText), ""
	}
	text, err := page.Text()
	if err != nil || !strings.Contains(text, token) {
		return fmt.Sprintf("Chromium loaded the sandbox's page but its DOM did not hold the page's text (%q, %v)", clipText(text), err), ""
	}
	target := "http://" + obs.canaryAddr + "/"
	if errText, err := page.Navigate(target); err != nil || errText == "" {
		return fmt.Sprintf("Chromium's direct request for the host's %s did not fail (%v)", obs.canaryAddr, err), ""
	}
	if d.Egress {
		ctxID, err := c.NewContext("http://"+bridge.BridgeAddr, "<-loopback>")
		if err != nil {
			return fmt.Sprintf("Chromium did not make a browser context through the proxy: %v", err), ""
		}
		viaProxy, err := c.NewPage(ctxID)
		if err != nil {
			return fmt.Sprintf("Chromium did not open a page through the proxy: %v", err), ""
		}
		if _, err := viaProxy.Navigate(target); err != nil {
			return fmt.Sprintf("Chromium did not ask the proxy for the host's %s: %v", obs.canaryAddr, err), ""
		}
		if text, err = viaProxy.Text(); err != nil || !strings.Contains(text, "egress refused") {
			return fmt.Sprintf("the proxy did not refuse Chromium's request for the host's %s (the page says %q, %v)", obs.canaryAddr, clipText(text), err), ""
		}
	}
	return "", ""
}

// clipText shortens a page's text for a reason.
func clipText(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

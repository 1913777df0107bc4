package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/internal/testenv"
)

// TestPlaywrightConnectOverCDP runs docs/browser.md's Playwright example
// (scripts/playwright-check, playwright-core pinned in its lock file)
// against a running worker: connectOverCDP with the sandbox's browser URL
// and the token, a page served inside the sandbox, its text, a screenshot.
func TestPlaywrightConnectOverCDP(t *testing.T) {
	requireChromium(t)
	node := testenv.RequireBinary(t, "node", "apt-get install -y nodejs npm")
	npm := testenv.RequireBinary(t, "npm", "apt-get install -y npm")
	if v, err := exec.Command(node, "--version").Output(); err != nil || !nodeAtLeast(string(v), 20) {
		testenv.Missing(t, "playwright-core needs node 20 or newer (this one: "+strings.TrimSpace(string(v))+"): install it from nodejs.org or NodeSource")
	}
	dir := "../scripts/playwright-check"
	install := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	install.Dir, install.Env = dir, append(os.Environ(), "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	_, _, _, api := startBrowserWorker(t)

	wc := client.NewWorker(api, "e2e-api-token", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*browserWait)
	defer cancel()
	info, err := wc.Create(ctx, client.CreateOptions{Browser: true})
	if err != nil {
		t.Fatalf("create a browser sandbox: %v", err)
	}
	sb := wc.Sandbox(info.ID)
	defer func() { _, _ = sb.Delete(context.Background()) }()
	servePage(ctx, t, sb, "hello, Playwright")

	run := exec.CommandContext(ctx, node, "connect.mjs")
	run.Dir = dir
	run.Env = append(os.Environ(), "BROWSER_URL="+sb.BrowserURL(), "WORKER_TOKEN=e2e-api-token", "PAGE_URL=http://127.0.0.1:8000/")
	out, err := run.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node connect.mjs: %v\n%s%s", err, out, stderr)
	}
	var res struct {
		Text            string `json:"text"`
		UserAgent       string `json:"userAgent"`
		ScreenshotBytes int    `json:"screenshotBytes"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.Text != "hello, Playwright" ||
		!strings.Contains(res.UserAgent, "HeadlessChrome") || res.ScreenshotBytes < 1000 {
		t.Fatalf("Playwright saw %s (%v)", out, err)
	}
}

// nodeAtLeast reports whether `node --version`'s answer ("v20.20.2") is of
// major version min or newer.
func nodeAtLeast(version string, min int) bool {
	major, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(version), "v"), ".")
	n, err := strconv.Atoi(major)
	return err == nil && n >= min
}

package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"openvibe.network/agentsandbox/workerapi"
	"strings"

	"github.com/gorilla/websocket"
	"openvibe.network/agentsandbox"
)

// The browser of a sandbox created with CreateOptions.Browser: a Chrome
// DevTools Protocol endpoint that Playwright (connectOverCDP), Puppeteer
// (connect) and chromedp (remote.NewAllocator) drive with BrowserURL and
// BrowserHeader (see docs/browser.md).

// Sentinels of the browser, matched by errors.Is on an *APIError.
var (
	// ErrNoBrowser: the worker has no browser, or the sandbox was created
	// without one (no_browser).
	ErrNoBrowser = errors.New("worker api: no browser")
	// ErrBrowserBusy: another connection drives the sandbox's browser
	// (browser_busy); one per sandbox.
	ErrBrowserBusy = errors.New("worker api: the browser has a client")
)

// BrowserURL is the WebSocket URL of sandbox id's browser (ws:// or wss://
// as the worker's base URL is http:// or https://): give it to a CDP client
// with BrowserHeader.
func (w *Worker) BrowserURL(id string) string {
	return "ws" + strings.TrimPrefix(w.base, "http") + sandboxPath(id, "browser")
}

// BrowserHeader is the header a CDP client must send with BrowserURL (the
// worker's token). It is the caller's own.
func (w *Worker) BrowserHeader() http.Header {
	return http.Header{"Authorization": {"Bearer " + w.token}}
}

// BrowserURL is the sandbox's browser's WebSocket URL (Worker.BrowserURL).
func (sb *Sandbox) BrowserURL() string { return sb.w.BrowserURL(sb.id) }

// BrowserVersion is the answer of the browser's /json/version, as
// Chromium's own, with WebSocketDebuggerURL pointing at BrowserURL.
type BrowserVersion = agentsandbox.BrowserVersion

// BrowserVersion asks the sandbox's browser its version (starting it unless
// it runs). It fails with ErrNoBrowser for a sandbox without one and
// ErrBrowserBusy while another connection drives it.
func (sb *Sandbox) BrowserVersion(ctx context.Context) (BrowserVersion, error) {
	var v BrowserVersion
	if err := sb.w.doJSON(ctx, http.MethodGet, sb.path("browser", "json", "version"), nil, &v, http.StatusOK); err != nil {
		return BrowserVersion{}, fmt.Errorf("browser version: %w", err)
	}
	return v, nil
}

// DialBrowser opens the sandbox's browser's CDP WebSocket (one CDP message
// per WebSocket text message; see BrowserURL), through the client's
// transport. One connection per sandbox: it fails while another drives the
// browser, and for a sandbox without one (the handshake's refusal; see
// BrowserVersion for the reason as an *APIError).
func (sb *Sandbox) DialBrowser(ctx context.Context) (*websocket.Conn, error) {
	conn, err := sb.w.dialWebSocket(ctx, sandboxPath(sb.id, "browser"))
	if err != nil {
		return nil, fmt.Errorf("dial browser: %w", err)
	}
	return conn, nil
}

// request is the create's body.
func (o CreateOptions) request() workerapi.CreateRequest {
	req := workerapi.CreateRequest{Env: o.Env, Secrets: o.Secrets, Egress: o.Egress, Image: o.Image,
		Browser: workerapi.BrowserOption{Set: o.Browser, BrowserRequest: workerapi.BrowserRequest{Start: o.Browser && o.StartBrowser}}}
	if o.TimeBoxMinutes != 0 {
		minutes := o.TimeBoxMinutes
		req.TimeBoxMinutes = &minutes
	}
	if o.Limits != (RequestLimits{}) {
		limits := o.Limits
		req.Limits = &limits
	}
	return req
}

// MarshalJSON writes the create's body: `browser` is true, or
// {"start":true} with StartBrowser.
func (o CreateOptions) MarshalJSON() ([]byte, error) {
	return json.Marshal(o.request())
}

// Package cdp is a minimal client of the Chrome DevTools Protocol over a
// message transport (a sandbox's browser connection): one call at a time,
// its answer matched by id, events skipped. The worker uses it to prove
// the browser (its self-test) and to answer /json/version; users drive the
// browser with a full client (chromedp, Playwright, Puppeteer).
package cdp

import (
	"encoding/json"
	"fmt"
)

// Transport carries whole protocol messages.
type Transport interface {
	Send(msg []byte) error
	Next() ([]byte, error)
}

// Client makes calls over a Transport. It is not safe for concurrent use.
type Client struct {
	t      Transport
	lastID int64
}

// New returns a Client over t.
func New(t Transport) *Client { return &Client{t: t} }

// Error is an error answer of the browser.
type Error struct {
	Method  string
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("cdp %s: %s (code %d)", e.Method, e.Message, e.Code)
}

// Call calls method with params (nil: none) in session (empty: the
// browser's own) and decodes the answer's result into result (when not
// nil). It reads the transport until the answer; events in between are
// dropped. Errors: the transport's, an *Error answer.
func (c *Client) Call(session, method string, params, result any) error {
	c.lastID++
	id := c.lastID
	req := struct {
		ID        int64  `json:"id"`
		Method    string `json:"method"`
		Params    any    `json:"params,omitempty"`
		SessionID string `json:"sessionId,omitempty"`
	}{id, method, params, session}
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("cdp %s: %w", method, err)
	}
	if err := c.t.Send(b); err != nil {
		return fmt.Errorf("cdp %s: %w", method, err)
	}
	for {
		msg, err := c.t.Next()
		if err != nil {
			return fmt.Errorf("cdp %s: %w", method, err)
		}
		var ans struct {
			ID     int64           `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *Error          `json:"error"`
		}
		if err := json.Unmarshal(msg, &ans); err != nil {
			return fmt.Errorf("cdp %s: an answer that is not JSON: %w", method, err)
		}
		if ans.ID != id {
			continue // an event, or the answer to an abandoned call
		}
		if ans.Error != nil {
			ans.Error.Method = method
			return ans.Error
		}
		if result == nil {
			return nil
		}
		if err := json.Unmarshal(ans.Result, result); err != nil {
			return fmt.Errorf("cdp %s: decode result: %w", method, err)
		}
		return nil
	}
}

// Version is the answer of Browser.getVersion.
type Version struct {
	ProtocolVersion string `json:"protocolVersion"`
	Product         string `json:"product"`
	Revision        string `json:"revision"`
	UserAgent       string `json:"userAgent"`
	JSVersion       string `json:"jsVersion"`
}

// GetVersion asks the browser its version.
func (c *Client) GetVersion() (Version, error) {
	var v Version
	err := c.Call("", "Browser.getVersion", nil, &v)
	return v, err
}

// Page is one page target the client attached to (flattened session).
type Page struct {
	c         *Client
	TargetID  string
	SessionID string
}

// NewPage opens a blank page, in browser context ctxID (empty: the
// default one), and attaches to it.
func (c *Client) NewPage(ctxID string) (*Page, error) {
	var t struct {
		TargetID string `json:"targetId"`
	}
	params := map[string]any{"url": "about:blank"}
	if ctxID != "" {
		params["browserContextId"] = ctxID
	}
	if err := c.Call("", "Target.createTarget", params, &t); err != nil {
		return nil, err
	}
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if err := c.Call("", "Target.attachToTarget", map[string]any{"targetId": t.TargetID, "flatten": true}, &s); err != nil {
		return nil, err
	}
	return &Page{c: c, TargetID: t.TargetID, SessionID: s.SessionID}, nil
}

// Navigate loads url in the page and returns Chromium's error text for a
// load that failed ("net::ERR_CONNECTION_REFUSED"), "" for one that did
// not.
func (p *Page) Navigate(url string) (string, error) {
	var r struct {
		ErrorText string `json:"errorText"`
	}
	err := p.c.Call(p.SessionID, "Page.navigate", map[string]any{"url": url}, &r)
	return r.ErrorText, err
}

// Eval evaluates expression in the page (awaiting a promise) and decodes
// its value into out.
func (p *Page) Eval(expression string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	params := map[string]any{"expression": expression, "returnByValue": true, "awaitPromise": true}
	if err := p.c.Call(p.SessionID, "Runtime.evaluate", params, &r); err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return fmt.Errorf("cdp Runtime.evaluate: %s", r.ExceptionDetails.Text)
	}
	if err := json.Unmarshal(r.Result.Value, out); err != nil {
		return fmt.Errorf("cdp Runtime.evaluate: decode value: %w", err)
	}
	return nil
}

// Text returns the page's text (its body's innerText) once it loaded.
func (p *Page) Text() (string, error) {
	var text string
	err := p.Eval(`new Promise(r => { const f = () => r(document.body ? document.body.innerText : ""); document.readyState === "complete" ? f() : addEventListener("load", f) })`, &text)
	return text, err
}

// Close closes the page.
func (p *Page) Close() error {
	return p.c.Call("", "Target.closeTarget", map[string]any{"targetId": p.TargetID}, nil)
}

// NewContext creates a browser context (an isolated profile in memory)
// whose requests go through proxyServer, bypassing it for bypass (Chromium's
// proxy bypass list syntax; "<-loopback>" sends loopback through it too).
func (c *Client) NewContext(proxyServer, bypass string) (string, error) {
	var r struct {
		BrowserContextID string `json:"browserContextId"`
	}
	params := map[string]any{"disposeOnDetach": true}
	if proxyServer != "" {
		params["proxyServer"] = proxyServer
		params["proxyBypassList"] = bypass
	}
	err := c.Call("", "Target.createBrowserContext", params, &r)
	return r.BrowserContextID, err
}

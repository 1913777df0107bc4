// Package cdp is a minimal client of the Chrome DevTools Protocol over a
// message transport (a sandbox's browser connection): one call at a time,
// its answer matched by id, events skipped. The worker uses it to prove
// the browser (its self-test) and to answer /json/version; users drive the
// browser with a full client (chromedp, Playwright, Puppeteer).
//
// A sandbox's browser runs as the sandbox's uid, so code in the sandbox
// can write into its pipe: over a transport that hands messages over in
// parts (PartReader), the client holds at most MaxMessage bytes of one,
// and skips a longer one part by part without keeping it.
package cdp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Transport carries whole protocol messages.
type Transport interface {
	Send(msg []byte) error
	Next() ([]byte, error)
}

// PartReader is a Transport that can also hand the next message over in
// parts, in order (each valid until the next call); last is true for a
// message's final part. A Client reads such a transport by parts, so that
// it never holds a message over its bound.
type PartReader interface {
	NextPart() (part []byte, last bool, err error)
}

// DefaultMaxMessage bounds a message a Client holds (when its transport is
// a PartReader); every answer the worker asks for is far smaller.
const DefaultMaxMessage = 1 << 20

// ErrTooLarge is the error of a call whose answer was over the client's
// bound (and skipped).
var ErrTooLarge = errors.New("cdp: an answer over the client's bound")

// Client makes calls over a Transport. It is not safe for concurrent use.
type Client struct {
	t      Transport
	max    int
	lastID int64
}

// New returns a Client over t, holding at most DefaultMaxMessage bytes of
// a message when t is a PartReader.
func New(t Transport) *Client { return &Client{t: t, max: DefaultMaxMessage} }

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
		msg, skippedID, err := c.next()
		if err != nil {
			return fmt.Errorf("cdp %s: %w", method, err)
		}
		if msg == nil {
			if skippedID == id {
				return fmt.Errorf("cdp %s: the answer was over %d bytes: %w", method, c.max, ErrTooLarge)
			}
			continue // an oversized event, or the answer to another call
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

// idHead bounds what of a skipped message is kept to read its id.
const idHead = 64

// next reads the next message whole; over a PartReader, a message over the
// bound is skipped part by part, msg is nil, and skippedID is the id it
// begins with ({"id":N, as Chromium writes its answers), or -1.
func (c *Client) next() (msg []byte, skippedID int64, err error) {
	pr, ok := c.t.(PartReader)
	if !ok {
		msg, err = c.t.Next()
		return msg, -1, err
	}
	var head []byte // of a message being skipped
	for {
		part, last, err := pr.NextPart()
		if err != nil {
			return nil, -1, err
		}
		switch {
		case head != nil: // skipping: nothing more of it is kept
		case len(msg)+len(part) > c.max:
			head = append([]byte{}, msg[:min(len(msg), idHead)]...)
			head = append(head, part[:min(len(part), idHead-len(head))]...)
			msg = nil
		default:
			msg = append(msg, part...)
		}
		if !last {
			continue
		}
		if head != nil {
			return nil, leadingID(head), nil
		}
		if msg == nil {
			msg = []byte{}
		}
		return msg, -1, nil
	}
}

// leadingID returns N of a message that begins {"id":N, or -1.
func leadingID(head []byte) int64 {
	rest, ok := bytes.CutPrefix(bytes.TrimLeft(head, " \t\r\n"), []byte(`{"id":`))
	if !ok {
		return -1
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	if end == 0 || end == len(rest) {
		return -1
	}
	n, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	if err != nil {
		return -1
	}
	return n
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

// FirstPage attaches to the browser's first page target, or opens a blank
// page when it has none.
func (c *Client) FirstPage() (*Page, error) {
	var targets struct {
		TargetInfos []struct {
			TargetID string `json:"targetId"`
			Type     string `json:"type"`
		} `json:"targetInfos"`
	}
	if err := c.Call("", "Target.getTargets", nil, &targets); err != nil {
		return nil, err
	}
	for _, t := range targets.TargetInfos {
		if t.Type == "page" {
			return c.attach(t.TargetID)
		}
	}
	return c.NewPage("")
}

// attach attaches to target id (a flattened session).
func (c *Client) attach(id string) (*Page, error) {
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if err := c.Call("", "Target.attachToTarget", map[string]any{"targetId": id, "flatten": true}, &s); err != nil {
		return nil, err
	}
	return &Page{c: c, TargetID: id, SessionID: s.SessionID}, nil
}

// Screenshot returns a PNG of what the page shows.
func (p *Page) Screenshot() ([]byte, error) {
	var shot struct {
		Data []byte `json:"data"` // base64 in JSON
	}
	err := p.c.Call(p.SessionID, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot)
	return shot.Data, err
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
	return c.attach(t.TargetID)
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

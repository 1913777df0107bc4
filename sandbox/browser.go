package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"openvibe.network/agentsandbox/internal/cdp"
	"openvibe.network/agentsandbox/sandbox/control"
)

// The headless browser of a sandbox created with Options.Browser: the
// host's Chromium (Config.Browser, under the read-only /usr every sandbox
// sees), run by the sandbox's init as one of its processes, with a fresh
// profile in the sandbox's tmpfs, out only through the sandbox's egress
// bridge, driven over the DevTools protocol through the init's control
// socket (never a TCP port: see control.OpBrowser).

// Errors of the browser.
var (
	// ErrNoBrowser is returned for a browser sandbox on a runtime without
	// Config.Browser, and for the browser of a sandbox created without one.
	ErrNoBrowser = errors.New("sandbox: no browser")
	// ErrBrowserBusy is returned by Browser while another connection
	// carries the sandbox's browser's messages.
	ErrBrowserBusy = errors.New("sandbox: the browser already has a client")
)

// BrowserCandidates are where FindBrowser looks for Chromium's binary (the
// program itself, not Debian's /usr/bin/chromium, a shell wrapper that
// sources /etc/chromium.d: the sandbox's own, ChromiumConfig, which agents
// that launch `chromium` themselves go through).
var browserCandidates = []string{
	"/usr/lib/chromium/chromium",
	"/usr/lib/chromium-browser/chromium-browser",
}

// FindBrowser returns the path of the host's Chromium binary, or "" when
// none is installed where a sandbox can run it (under /usr).
func FindBrowser() string {
	for _, p := range browserCandidates {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// checkBrowserPath checks Config.Browser: a program under /usr (the only
// host tree a sandbox sees).
func checkBrowserPath(p string) error {
	if p == "" {
		return nil
	}
	if !filepath.IsAbs(p) || !strings.HasPrefix(filepath.Clean(p), "/usr/") {
		return fmt.Errorf("browser %q: give an absolute path under /usr (a sandbox sees no other host directory)", p)
	}
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("browser: %w", err)
	}
	if !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("browser %s is not an executable file", p)
	}
	return nil
}

// BrowserProfile is the browser's profile directory inside the sandbox, in
// its tmpfs: fresh in every sandbox, gone with its wipe.
const BrowserProfile = "/tmp/.browser-profile"

// BrowserArgv is how the init starts Chromium at path (the init adds
// --proxy-server with the sandbox's egress bridge when it has egress):
// headless, the DevTools protocol on the pipe of descriptors 3 and 4, a
// fresh profile in the sandbox's tmpfs, shared memory in /tmp (the same
// capped tmpfs), Chromium's own sandbox off (it needs user namespaces,
// which this sandbox refuses; this sandbox is the boundary: see
// docs/browser.md), and nothing that talks to the network on its own or
// around the proxy (no QUIC, no non-proxied WebRTC UDP, no DNS over HTTPS,
// no background or component updates, no crash reports).
func BrowserArgv(path string) []string {
	return []string{path,
		"--headless", "--no-sandbox", "--remote-debugging-pipe",
		"--user-data-dir=" + BrowserProfile,
		"--no-first-run", "--no-default-browser-check", "--disable-dev-shm-usage", "--disable-gpu",
		"--disable-quic", "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
		"--disable-features=DnsOverHttps,AsyncDns,MediaRouter,OptimizationHints,Translate,AutofillServerCommunication,CertificateTransparencyComponentUpdater,InterestFeedContentSuggestions",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-default-apps", "--disable-extensions", "--disable-client-side-phishing-detection",
		"--no-pings", "--disable-breakpad", "--disable-domain-reliability", "--metrics-recording-only",
		"--password-store=basic", "--use-mock-keychain", "--mute-audio",
		"about:blank",
	}
}

// HasBrowser reports whether the runtime makes browser sandboxes
// (Config.Browser).
func (r *Runtime) HasBrowser() bool { return r.cfg.Browser != "" }

// browserRequest is the control request of op for sandbox b's browser.
func (r *Runtime) browserRequest(b *sandboxState, op string) (control.Request, error) {
	if !b.opts.Browser {
		return control.Request{}, fmt.Errorf("sandbox %s was created without a browser: %w", b.id, ErrNoBrowser)
	}
	return control.Request{Op: op, Argv: BrowserArgv(r.cfg.Browser)}, nil
}

// StartBrowser starts the browser of sandbox id unless it runs, and returns
// its process. Errors: ErrNotFound; ErrNoBrowser; Chromium could not start.
func (r *Runtime) StartBrowser(ctx context.Context, id string) (Process, error) {
	b, err := r.get(id)
	if err != nil {
		return Process{}, err
	}
	req, err := r.browserRequest(b, control.OpBrowserStart)
	if err != nil {
		return Process{}, err
	}
	var p Process
	if err := r.call(ctx, id, req, &p); err != nil {
		return Process{}, fmt.Errorf("start the browser: %w", err)
	}
	return p, nil
}

// BrowserConn carries the DevTools protocol's messages of a sandbox's
// browser (Runtime.Browser): Send one, Next the browser's answers and
// events in order. It is one connection to the sandbox's init, the only
// one the browser has while it is open; Close ends it (the browser runs
// on). Send and Next may be called from different goroutines; neither
// from two at once.
type BrowserConn struct {
	b    *sandboxState
	conn net.Conn
	fw   *control.Writer
	fr   *control.Reader
	end  func()
	// Pid is the browser's pid in the sandbox.
	Pid int
}

// BrowserEndedError is what BrowserConn.Next returns once the browser
// ended: its exit code and, when a limit ended it, the limit ("memory",
// "pids", "too_large" for a message over control.MaxBrowserMessage).
type BrowserEndedError struct {
	ExitCode int
	Reason   string
}

func (e *BrowserEndedError) Error() string {
	switch e.Reason {
	case "memory":
		return "the browser ended: the sandbox's memory limit killed it"
	case "pids":
		return "the browser ended: the sandbox's pids limit stopped it"
	case "too_large":
		return fmt.Sprintf("the browser ended: it sent a message over %d bytes", control.MaxBrowserMessage)
	}
	return "the browser ended with exit code " + strconv.Itoa(e.ExitCode)
}

// Browser connects to the browser of sandbox id, starting it unless it
// runs. Errors: ErrNotFound; ErrNoBrowser; ErrBrowserBusy; the browser
// could not start.
func (r *Runtime) Browser(ctx context.Context, id string) (*BrowserConn, error) {
	b, err := r.get(id)
	if err != nil {
		return nil, err
	}
	return r.browserConn(ctx, b)
}

// browserConn connects to sandbox b's browser, starting it unless it runs.
func (r *Runtime) browserConn(ctx context.Context, b *sandboxState) (*BrowserConn, error) {
	req, err := r.browserRequest(b, control.OpBrowser)
	if err != nil {
		return nil, err
	}
	c, fw, end, err := r.request(ctx, b, req)
	if err != nil {
		return nil, fmt.Errorf("connect to the browser: %w", err)
	}
	bc := &BrowserConn{b: b, conn: c, fw: fw, fr: control.NewReader(c), end: end}
	kind, p, err := bc.fr.Next()
	if err != nil {
		end()
		return nil, fmt.Errorf("connect to the browser: %w", err)
	}
	switch kind {
	case control.FrameStarted:
		bc.Pid, _ = strconv.Atoi(string(p))
		return bc, nil
	case control.FrameDone:
		err = bc.doneError(p)
	default:
		err = fmt.Errorf("unexpected frame %q", kind)
	}
	end()
	return nil, fmt.Errorf("connect to the browser: %w", err)
}

// warmBrowser starts pooled sandbox b's browser and waits until it answers
// the DevTools protocol (Browser.getVersion), then lets go of it: Chromium
// runs on with its one blank page and no client, for the Create that takes
// b to connect to first. Its answer is dropped: nothing of this connection
// stays in the browser.
func (r *Runtime) warmBrowser(ctx context.Context, b *sandboxState) error {
	bc, err := r.browserConn(ctx, b)
	if err != nil {
		return err
	}
	defer bc.Close()
	if _, err := cdp.New(bc).GetVersion(); err != nil {
		return fmt.Errorf("ask the browser its version: %w", err)
	}
	return nil
}

// Send sends one message (a JSON text without NUL bytes) to the browser.
func (c *BrowserConn) Send(msg []byte) error {
	if bytes.IndexByte(msg, control.BrowserDelimiter) >= 0 {
		return errors.New("browser message: it holds a NUL byte")
	}
	if len(msg) > control.MaxBrowserMessage {
		return fmt.Errorf("browser message of %d bytes: %w (at most %d)", len(msg), ErrTooLarge, control.MaxBrowserMessage)
	}
	framed := make([]byte, len(msg)+1) // the caller's msg stays its own
	copy(framed, msg)
	if err := c.fw.Frame(control.FrameData, framed); err != nil { // Frame splits it at control.MaxFrame
		return fmt.Errorf("send to the browser: %w", err)
	}
	return nil
}

// Next returns the browser's next message (the caller's own). Once the
// browser ended it returns a *BrowserEndedError; other errors: the
// connection broke, a message over the bound (ErrTooLarge).
func (c *BrowserConn) Next() ([]byte, error) {
	var msg []byte
	for {
		part, last, err := c.NextPart()
		if err != nil {
			return nil, err
		}
		if len(msg)+len(part) > control.MaxBrowserMessage {
			return nil, fmt.Errorf("read from the browser: %w", ErrTooLarge)
		}
		msg = append(msg, part...)
		if last {
			return msg, nil
		}
	}
}

// NextPart returns the next part of the browser's next message, as the
// init passed it on (at most control.MaxFrame bytes, valid until the next
// call); last is true for the message's final part. A message is one or
// more parts, in order, so that a caller that passes parts on as they come
// holds none of it whole. Errors as Next's, but for the bound, which is
// the caller's to keep.
func (c *BrowserConn) NextPart() (part []byte, last bool, err error) {
	for {
		kind, p, err := c.fr.Next()
		if err != nil {
			return nil, false, fmt.Errorf("read from the browser: %w", err)
		}
		switch kind {
		case control.FrameData:
			i := bytes.IndexByte(p, control.BrowserDelimiter)
			switch {
			case i < 0 && len(p) == 0:
				continue
			case i < 0:
				return p, false, nil
			case i+1 < len(p):
				// The init sends one message per run of frames; a second one
				// in the same frame is a broken peer.
				return nil, false, errors.New("read from the browser: two messages in one frame")
			}
			return p[:i], true, nil
		case control.FrameDone:
			return nil, false, c.doneError(p)
		}
	}
}

// doneError is the error of the init's done frame p.
func (c *BrowserConn) doneError(p []byte) error {
	var done control.Done
	if err := json.Unmarshal(p, &done); err != nil {
		return fmt.Errorf("read from the browser: %w", err)
	}
	switch done.Code {
	case "":
		return errors.New("the browser's connection ended")
	case control.CodeBusy:
		return fmt.Errorf("%s: %w", done.Error, ErrBrowserBusy)
	case control.CodeFailed:
		if done.ExitCode == 0 && done.Reason == "" && strings.HasPrefix(done.Error, "cannot start") {
			return errors.New(done.Error)
		}
		why := done.Reason
		if why == "" {
			if ev, err := c.b.group.Events(); err == nil {
				switch {
				case ev.OOMKills > 0:
					why = "memory"
				case ev.PidsMax > 0:
					why = "pids"
				}
			}
		}
		return &BrowserEndedError{ExitCode: done.ExitCode, Reason: why}
	}
	return codeError(done)
}

// Close ends the connection; the browser runs on.
func (c *BrowserConn) Close() error {
	c.end()
	return nil
}

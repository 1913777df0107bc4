package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/cdp"
	"openvibe.network/agentsandbox/internal/wsmsg"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/sandbox/control"
)

// The browser of a sandbox created with `browser`, driven over the Chrome
// DevTools Protocol:
//
//	GET …/browser               a WebSocket: one CDP message per WebSocket
//	                            message, both ways, as Chromium's own
//	                            /devtools/browser/… endpoint speaks it
//	GET …/browser/json/version  Chromium's /json/version, whose
//	                            webSocketDebuggerUrl points at …/browser
//
// So Playwright's connectOverCDP, Puppeteer's connect and chromedp connect
// with the URL and the Authorization header. One connection per sandbox
// (a second is refused with 409 browser_busy); a message over
// Config.BrowserMaxMessage ends the connection (the log says why). The
// browser's messages reach a slow client as fast as it reads, in frames of
// browserFrame bytes: the browser waits for it, not the worker, which holds
// no whole message; a client that stalls one write for Config.WriteTimeout
// is cut off.

// BrowserVersion is the answer of GET …/browser/json/version, with
// Chromium's own field names.
type BrowserVersion = agentsandbox.BrowserVersion

// browserSandbox checks that sandbox id exists and has a browser.
func (s *Server) browserSandbox(id string) error {
	info, ok := s.info(id)
	if !ok {
		return errSandboxNotFound(id)
	}
	if !info.Browser {
		return newError(CodeNoBrowser, "sandbox %s has no browser; create one with \"browser\": true", id)
	}
	return nil
}

// browserError maps the runtime's errors of a browser connection.
func browserError(id string, err error) error {
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		return errSandboxNotFound(id)
	case errors.Is(err, sandbox.ErrBrowserBusy):
		return newError(CodeBrowserBusy, "the browser of sandbox %s already has a client (one CDP connection per sandbox); close the other connection first", id)
	case errors.Is(err, sandbox.ErrNoBrowser):
		return newError(CodeNoBrowser, "sandbox %s has no browser; create one with \"browser\": true", id)
	}
	return fmt.Errorf("browser of %s: %w", id, err)
}

// browserFrame is the size of the WebSocket frames a browser's message is
// sent to its client in: the worker holds at most one frame of a message
// (and the control protocol's one frame) per connection, however large the
// message; the rest waits in the sandbox, whose memory it is.
const browserFrame = 64 << 10

// browser handles GET …/browser: the CDP WebSocket.
func (s *Server) browser(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.browserSandbox(id); err != nil {
		return err
	}
	if !wantsWebSocket(r) {
		return badRequest("the browser is a WebSocket: connect with Upgrade: websocket (a CDP client: Playwright's connectOverCDP, Puppeteer's connect, chromedp)")
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	bc, err := s.cfg.Runtime.Browser(ctx, id)
	if err != nil {
		return browserError(id, err)
	}
	defer bc.Close()
	ws, err := wsmsg.Upgrader(browserFrame, refuseHandshake).Upgrade(w, r, nil)
	if err != nil {
		return nil // refuseHandshake answered
	}
	defer ws.Close()
	ws.SetReadLimit(int64(s.cfg.BrowserMaxMessage))
	in, out, why := s.serveBrowser(ctx, cancel, ws, bc)
	addLog(r.Context(), slog.Int64("messages_in", in), slog.Int64("messages_out", out), slog.String("ended", why))
	return nil
}

// serveBrowser carries messages between ws and the browser until either
// side ends; it returns the messages each way and why it ended. The
// browser's messages are passed on part by part as they come (see
// browserFrame); the client's, which Config.BrowserMaxMessage bounds, whole.
func (s *Server) serveBrowser(ctx context.Context, cancel context.CancelFunc, ws *websocket.Conn, bc *sandbox.BrowserConn) (in, out int64, why string) {
	clientEnd := make(chan string, 1)
	go func() { // the client's messages, to the browser
		defer cancel()
		for {
			_, m, err := ws.ReadMessage()
			if errors.Is(err, websocket.ErrReadLimit) {
				clientEnd <- fmt.Sprintf("a message over %d bytes from the client", s.cfg.BrowserMaxMessage)
				return
			}
			if err != nil {
				clientEnd <- "the client closed"
				return
			}
			if err := bc.Send(m); err != nil {
				clientEnd <- err.Error()
				return
			}
			in++
		}
	}()
	go func() { <-ctx.Done(); bc.Close() }()
	for {
		err := s.forwardBrowserMessage(ws, bc)
		if err == nil {
			out++
			continue
		}
		select {
		case why = <-clientEnd:
		default:
			why = err.Error()
			var ended *sandbox.BrowserEndedError
			if errors.As(err, &ended) {
				why = ended.Error()
			}
		}
		return in, out, why
	}
}

// errClientStalled ends a browser connection whose client does not take a
// write within Config.WriteTimeout.
var errClientStalled = errors.New("the client stopped reading")

// forwardBrowserMessage passes the browser's next message to ws, each part
// as it comes, as one text message. Errors: the browser's (see
// sandbox.BrowserConn.NextPart); a message over control.MaxBrowserMessage
// (the init ends the browser first); errClientStalled.
func (s *Server) forwardBrowserMessage(ws *websocket.Conn, bc *sandbox.BrowserConn) error {
	part, last, err := bc.NextPart()
	if err != nil {
		return err
	}
	w, err := ws.NextWriter(websocket.TextMessage)
	if err != nil {
		return errClientStalled
	}
	for size := len(part); ; size += len(part) {
		if size > control.MaxBrowserMessage {
			return fmt.Errorf("a message over %d bytes from the browser", control.MaxBrowserMessage)
		}
		_ = ws.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if _, err := w.Write(part); err != nil {
			return errClientStalled
		}
		if last {
			break
		}
		if part, last, err = bc.NextPart(); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return errClientStalled
	}
	return nil
}

// browserVersion handles GET …/browser/json/version.
func (s *Server) browserVersion(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.browserSandbox(id); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), browserVersionTimeout)
	defer cancel()
	bc, err := s.cfg.Runtime.Browser(ctx, id)
	if err != nil {
		return browserError(id, err)
	}
	defer bc.Close()
	stop := context.AfterFunc(ctx, func() { bc.Close() }) // the call too is bounded
	defer stop()
	v, err := cdp.New(bc).GetVersion() // holds at most cdp.DefaultMaxMessage of a message
	if err != nil {
		return browserError(id, err)
	}
	scheme := "ws"
	if r.TLS != nil {
		scheme = "wss"
	}
	webkit := ""
	if _, after, ok := strings.Cut(v.UserAgent, "AppleWebKit/"); ok {
		webkit, _, _ = strings.Cut(after, " ")
	}
	writeJSON(w, http.StatusOK, BrowserVersion{
		Browser: v.Product, ProtocolVersion: v.ProtocolVersion, UserAgent: v.UserAgent,
		V8Version: v.JSVersion, WebKitVersion: webkit,
		WebSocketDebuggerURL: scheme + "://" + r.Host + "/v1/sandboxes/" + id + "/browser",
	})
	return nil
}

// The worker's own calls read the browser's pipe by parts (see cdp.New).
var _ cdp.PartReader = (*sandbox.BrowserConn)(nil)

// browserVersionTimeout bounds /json/version (the browser's start included).
const browserVersionTimeout = time.Minute

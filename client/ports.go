package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"openvibe.network/agentsandbox/workerapi"
)

// What a sandbox serves on its own loopback, reached through the worker
// (see docs/worker.md): PortURL with PortHeader for a program that holds
// the worker's token (HTTP and WebSocket), Preview for a person's browser.

// ErrNoPreview: the worker serves no previews (no_preview): it was started
// without --preview-listen.
var ErrNoPreview = errors.New("worker api: no previews")

// PortURL is the URL through which the worker forwards requests to port of
// sandbox id, ending in "/": append the server's own path without its
// leading "/" (e.g. PortURL(id, 8000)+"api/items?x=1"). Send PortHeader with
// every request (a WebSocket's too, with "ws" for "http"); the worker
// removes it before the request enters the sandbox.
func (w *Worker) PortURL(id string, port int) string {
	return w.base + sandboxPath(id, "ports", strconv.Itoa(port)) + "/"
}

// PortHeader is the header a request to a PortURL must carry (the worker's
// token). It is the caller's own.
func (w *Worker) PortHeader() http.Header { return w.BrowserHeader() }

// PortURL is Worker.PortURL of this sandbox.
func (sb *Sandbox) PortURL(port int) string { return sb.w.PortURL(sb.id, port) }

// Preview is a signed URL that opens one port of one sandbox in a browser.
type Preview = workerapi.Preview

// Preview asks for a URL that opens port of the sandbox in a person's
// browser for ttl (rounded up to a second; 0: the worker's default, an
// hour; at most workerapi.MaxPreviewTTL), on the worker's preview
// listener. The URL holds a token: give it only to whom may see the
// sandbox's port. It dies with the sandbox, at ExpiresAt, or when the
// worker restarts. It fails with ErrNoPreview on a worker without previews,
// ErrInvalidRequest for a port or ttl out of range, and ErrSandboxNotFound.
func (sb *Sandbox) Preview(ctx context.Context, port int, ttl time.Duration) (Preview, error) {
	req := workerapi.PreviewRequest{TTLSeconds: int((ttl + time.Second - 1) / time.Second)}
	var p Preview
	if err := sb.w.doJSON(ctx, http.MethodPost, sb.path("ports", strconv.Itoa(port), "preview"), req, &p, http.StatusOK); err != nil {
		return Preview{}, fmt.Errorf("preview of port %d: %w", port, err)
	}
	return p, nil
}

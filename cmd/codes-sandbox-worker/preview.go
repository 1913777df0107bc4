package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"openvibe.network/agentsandbox/worker/httpapi"
)

// checkPreview checks the previews' flags before anything starts: a base
// URL only with a listener, and one the API takes.
func checkPreview(addr, base string) error {
	switch {
	case addr == "" && base != "":
		return errors.New("--preview-base-url needs --preview-listen (the address of the previews' listener)")
	case base != "":
		if err := httpapi.CheckPreviewBaseURL(base); err != nil {
			return fmt.Errorf("--preview-base-url: %w", err)
		}
	}
	return nil
}

// listenPreview listens for the previews on addr ("": none) and returns
// the listener and the base URL of the previews: base, or, on loopback
// without one, http://{port}-{id}.localhost:PORT (names under localhost
// reach loopback in browsers without any resolver). Errors: the listen
// failed; a listener beyond loopback without a base URL (a configError).
func listenPreview(addr, base string, log *slog.Logger) (net.Listener, string, error) {
	if addr == "" {
		return nil, "", nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("listen for previews: %w", err)
	}
	loopback := isLoopback(ln.Addr())
	switch {
	case base == "" && !loopback:
		ln.Close()
		return nil, "", configError{errors.New("the previews listen beyond loopback: give --preview-base-url, the URL browsers reach that listener by, with {port} and {id} in its host name (e.g. https://{port}-{id}.preview.example behind a TLS proxy with a wildcard certificate)")}
	case base == "":
		base = "http://{port}-{id}.localhost:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	case !loopback && strings.HasPrefix(strings.ToLower(base), "http://"):
		log.Warn("the previews' base URL is plain http beyond loopback: their tokens and cookies cross the network in clear; serve them as https (a TLS proxy in front of --preview-listen)",
			"addr", ln.Addr().String())
	}
	return ln, base, nil
}

// servePreview serves api's previews on ln until srv shuts down (its
// shutdown closes them: a preview is a person's page, not a request to
// wait for); served gets the listener's end.
func servePreview(api *httpapi.Server, srv *http.Server, ln net.Listener, served chan<- error, log *slog.Logger) {
	psrv := &http.Server{Handler: api.PreviewHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: previewMaxHeaderBytes, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	srv.RegisterOnShutdown(func() { psrv.Close() })
	go func() {
		err := psrv.Serve(ln)
		select {
		case served <- fmt.Errorf("serve previews: %w", err):
		default:
		}
	}()
	log.Info("serving previews", "addr", ln.Addr().String())
}

// Bounds of a request's head on the API listener (its clients are
// programs: the SDKs, Codes; the egress proxy's 16 KiB) and on the preview
// listener (a person's browser, whose cookies may be many).
const (
	apiMaxHeaderBytes     = 16 << 10
	previewMaxHeaderBytes = 64 << 10
)

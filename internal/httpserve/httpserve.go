// Package httpserve runs an HTTP server for a command's whole life: listen,
// write the address actually listened on to a file (atomically, for scripts
// and tests that pick port 0), serve (HTTPS when given a certificate), and on
// the end of the context stop accepting connections and let the requests in
// flight finish within a bound.
//
//	err := httpserve.Run(ctx, httpserve.Config{Addr: "127.0.0.1:8080", Handler: h, Logger: log})
//
// It logs three lines: "listening" (with addr, written after the address
// file), "shutting down" (with timeout_ms) and "stopped"; and, at most every
// 10 s each, how many connections it refused, how many it closed to make
// room for new ones, and how many TLS handshakes failed.
//
// Every resource a client can hold is capped: connections (overall, and
// per client address unless it is a trusted proxy's; at the overall cap a
// connection idle for a second or more makes room for a new one), the
// time to send a request's header and body, the time a connection may stay
// idle (30 s), the size of a header (64 KiB). The answers net/http writes
// itself, on a request it cannot read, can be given a body of the caller's
// (Config.ErrorBody), over TLS too: the server holds each connection around
// its TLS layer (and so speaks HTTP/1.1 only).
package httpserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"openvibe.network/agentsandbox/internal/atomicfile"
)

// Defaults of Config's zero values.
const (
	DefaultShutdownTimeout   = 30 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 30 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	maxDefaultMaxConns       = 4096
)

// DefaultMaxConns is Config.MaxConns's default: 4096, or half the
// process's limit of open files when that is lower (the rest are for the
// database and the logs), and at least 16.
func DefaultMaxConns() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return maxDefaultMaxConns
	}
	return int(max(16, min(maxDefaultMaxConns, rl.Cur/2)))
}

// Config configures Run. Handler and one of Addr or Listener are required;
// every zero duration takes its default.
type Config struct {
	// Addr is the TCP address to listen on (port 0 picks a free port).
	Addr string
	// Listener, when set, is served instead of listening on Addr; Run
	// closes it.
	Listener net.Listener
	// AddrFile, when set, receives the address listened on and a newline,
	// written atomically (mode 0644) before the "listening" line.
	AddrFile string
	// Handler answers every request.
	Handler http.Handler
	// TLS, when set, makes the server speak HTTPS with this configuration
	// (it must hold a certificate, or GetCertificate).
	TLS *tls.Config
	// ShutdownTimeout bounds how long the requests in flight may take to
	// finish once ctx ends (DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are the
	// http.Server's (Default… when zero).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes is the http.Server's (DefaultMaxHeaderBytes when zero).
	MaxHeaderBytes int
	// MaxConns caps the connections open at once (DefaultMaxConns() when
	// zero). At the cap, a new connection closes the one idle (or open
	// without a request) the longest, if one has been for a second; else
	// it is closed at once.
	MaxConns int
	// MaxConnsPerClient caps the connections of one client address (an
	// IPv6 one by its /64); DefaultMaxConnsPerClient when zero. A client
	// past it has its new connection closed at once.
	MaxConnsPerClient int
	// TrustedProxies are the addresses of proxies in front (a load
	// balancer, a TLS terminator): their connections count only against
	// MaxConns, as they carry many clients' requests. Such a proxy must cap
	// each client itself.
	TrustedProxies []netip.Prefix
	// ErrorBody, when set, gives the body (JSON) of the answers net/http
	// writes itself to a request it cannot read (400, 431, 501, 505…), for
	// the status and net/http's own text.
	ErrorBody func(status int, text string) []byte
	// Logger receives the lifecycle lines and the server's own errors (at
	// warn); nil discards them.
	Logger *slog.Logger
	// ListenAttrs are added to the "listening" line (e.g. which store).
	ListenAttrs []slog.Attr
}

// Run listens, serves until ctx ends, then shuts down gracefully. It returns
// nil after a clean shutdown. Its error says what failed: the configuration
// (no handler, no address), listening, writing the address file (the
// listener is closed then), serving, or a shutdown that did not finish
// within ShutdownTimeout (the remaining connections are closed then).
func Run(ctx context.Context, cfg Config) error {
	if cfg.Handler == nil {
		return errors.New("serve: config has no handler")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln := cfg.Listener
	if ln == nil {
		if cfg.Addr == "" {
			return errors.New("serve: config has neither an address nor a listener")
		}
		var err error
		if ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.Addr); err != nil {
			return fmt.Errorf("serve: listen: %w", err)
		}
	}
	addr := ln.Addr().String()
	if cfg.AddrFile != "" {
		if err := atomicfile.Write(cfg.AddrFile, []byte(addr+"\n"), 0o644); err != nil {
			_ = ln.Close()
			return fmt.Errorf("serve: address file: %w", err)
		}
	}
	srv := newServer(cfg, log)
	var tlsConfig *tls.Config
	if cfg.TLS != nil {
		// The server holds each connection around its TLS layer (see conn),
		// so it does not negotiate HTTP/2: offer HTTP/1.1 alone.
		tlsConfig = cfg.TLS.Clone()
		tlsConfig.NextProtos = []string{"http/1.1"}
		srv.Handler = withTLSState(srv.Handler)
	}
	ln = &limitListener{Listener: ln, l: newLimiter(cfg, log), tlsConfig: tlsConfig}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	attrs := append([]slog.Attr{slog.String("addr", addr), slog.Bool("tls", cfg.TLS != nil)}, cfg.ListenAttrs...)
	log.LogAttrs(ctx, slog.LevelInfo, "listening", attrs...)
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	return shutdown(srv, served, orDefault(cfg.ShutdownTimeout, DefaultShutdownTimeout), log)
}

// newServer returns the http.Server of cfg.
func newServer(cfg Config, log *slog.Logger) *http.Server {
	maxHeader := cfg.MaxHeaderBytes
	if maxHeader == 0 {
		maxHeader = DefaultMaxHeaderBytes
	}
	return &http.Server{
		Handler:           cfg.Handler,
		ReadHeaderTimeout: orDefault(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       orDefault(cfg.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:      orDefault(cfg.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:       orDefault(cfg.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    maxHeader,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnState:         trackState,
		ConnContext:       func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
	}
}

// shutdown stops srv accepting, waits up to timeout for the requests in
// flight, and then for Serve to return.
func shutdown(srv *http.Server, served <-chan error, timeout time.Duration, log *slog.Logger) error {
	log.Info("shutting down", "timeout_ms", timeout.Milliseconds())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
		<-served
		return fmt.Errorf("serve: shutdown: requests still in flight after %s: %w", timeout, err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("stopped")
	return nil
}

// orDefault returns d, or def when d is zero.
func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

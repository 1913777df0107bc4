package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"openvibe.network/agentsandbox/internal/buildinfo"
	"openvibe.network/agentsandbox/internal/cli"
	"openvibe.network/agentsandbox/internal/httpserve"
	"openvibe.network/agentsandbox/internal/jsonlog"
	"openvibe.network/agentsandbox/live/httpapi"
)

// serveFlags are the flags of `ovlive serve`.
type serveFlags struct {
	db                dbFlags
	config            string
	listen            string
	addrFile          string
	shutdownTimeout   time.Duration
	logLevel          slog.Level
	tlsCert           string
	tlsKey            string
	sessionTTL        time.Duration
	secureCookies     bool
	maxConns          int
	maxConnsPerClient int
	trustedProxies    prefixList
}

// openTimeout bounds opening the store (connecting, migrating) and the
// probe that follows, at start: a database that accepts connections and
// never answers must not keep serve or admin waiting for ever.
const openTimeout = 30 * time.Second

const serveHelp = `Serves the check-in endpoint (POST /api/streams/agent/ID/plays/worker), the
owner's view (GET on the same path, and …/history), the owner's pages
(/streams, /streams/agent/ID/worker, /login, /logout), /healthz and /metrics.

Every flag can also be set in the environment (OVLIVE_ and the flag's name in
capitals with _ for -, e.g. OVLIVE_SHUTDOWN_TIMEOUT=10s) or in a config file
(--config FILE or OVLIVE_CONFIG: TOML, or JSON for a name ending in .json,
with the flags' names as keys, e.g. listen = "127.0.0.1:8080"). The command
line wins over the environment, which wins over the file.

It refuses to start when the store cannot be written, or cannot be opened
within 30 s. A request waits for the database at most --db-timeout (then it
is answered 503). Connections are capped (--max-conns, --max-conns-per-client;
a proxy in front is named with --trusted-proxy) and closed after 30 s idle.
On SIGINT or SIGTERM it stops accepting connections, lets the requests in
flight finish (within --shutdown-timeout) and exits 0.`

// serveFlagSet returns serve's flags and the values they set.
func serveFlagSet() (*flag.FlagSet, *serveFlags) {
	f := &serveFlags{}
	fs := cli.NewFlagSet("ovlive serve", "[--listen ADDR] [--db DSN] [--config FILE] [flags]", serveHelp)
	fs.StringVar(&f.config, "config", "", "read settings from `FILE` (TOML, or JSON for *.json); also OVLIVE_CONFIG")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "the `ADDR` to listen on (port 0 picks a free port)")
	fs.StringVar(&f.addrFile, "addr-file", "", "write the address actually listened on to `FILE` once listening")
	durationVar(fs, &f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a shutdown waits for requests in flight (`DURATION`)")
	fs.TextVar(&f.logLevel, "log-level", slog.LevelInfo, "the lowest `LEVEL` logged: debug, info, warn or error")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS with the certificate chain in `FILE` (PEM; with --tls-key)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the private key of --tls-cert, in `FILE` (PEM)")
	durationVar(fs, &f.sessionTTL, "session-ttl", httpapi.DefaultSessionTTL, "how long a session made by signing in lasts (`DURATION`)")
	fs.BoolVar(&f.secureCookies, "secure-cookies", false, "mark the session cookie Secure even over plain HTTP (behind a TLS-terminating proxy)")
	fs.IntVar(&f.maxConns, "max-conns", 0, "the most connections open at once (`N`; 0: 4096, or half the open-file limit when lower)")
	fs.IntVar(&f.maxConnsPerClient, "max-conns-per-client", httpserve.DefaultMaxConnsPerClient, "the most connections one client address holds (`N`; a trusted proxy's are not counted so)")
	fs.Var(&f.trustedProxies, "trusted-proxy", "the `ADDRESS` or prefix of a proxy in front, whose connections carry many clients (repeat, or a comma-separated list)")
	f.db.register(fs)
	return fs, f
}

func serveCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, f := serveFlagSet()
	if code, ok := cli.Parse(fs, args, 0, 0, stdout, stderr); !ok {
		return code
	}
	if err := applySettings(fs, f.config); err != nil {
		return cli.UsageError(fs, stderr, "%v", err)
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return cli.UsageError(fs, stderr, "give both --tls-cert and --tls-key, or neither")
	}
	if err := f.db.check(); err != nil {
		return cli.UsageError(fs, stderr, "%v", err)
	}
	if f.sessionTTL <= 0 || f.shutdownTimeout <= 0 {
		return cli.UsageError(fs, stderr, "--session-ttl and --shutdown-timeout must be positive")
	}
	if f.maxConns < 0 || f.maxConnsPerClient < 0 {
		return cli.UsageError(fs, stderr, "--max-conns and --max-conns-per-client must not be negative")
	}
	lw := newLogWriter(stderr)
	defer lw.Close()
	log := slog.New(jsonlog.NewHandler(lw, &slog.HandlerOptions{Level: f.logLevel}))
	tuneRuntime()
	if err := serve(ctx, *f, log); err != nil {
		log.Error("serve failed", "err", err.Error())
		return 1
	}
	return 0
}

// tuneRuntime sets two runtime knobs for serving check-ins, unless the
// environment sets them (GOGC, GOMAXPROCS). Both were measured with
// scripts/bench-live.sh on 2 cores.
func tuneRuntime() {
	if os.Getenv("GOGC") == "" {
		// A check-in allocates tens of KiB of garbage over a live heap of a
		// few MiB: collecting at 5x the live heap instead of 2x cuts the
		// server's CPU per check-in by about a quarter, for little memory.
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < 4 {
		// Every SQLite commit blocks its one writer goroutine in fsync; with
		// as few Ps as cores, it comes back to queue behind every runnable
		// handler while all check-ins wait for it. A few more Ps than cores
		// let the kernel run it at once.
		runtime.GOMAXPROCS(4)
	}
}

// serve opens the store, checks that it can write, and runs the server
// until ctx ends, then shuts it down gracefully: requests in flight
// (check-ins being committed) finish, within the timeout.
func serve(ctx context.Context, f serveFlags, log *slog.Logger) error {
	log.Info("opening store", "db", describeDB(f.db.dsn), "timeout_ms", openTimeout.Milliseconds())
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	store, err := openStore(octx, f.db, false)
	if err != nil {
		return fmt.Errorf("open store %s: %w", describeDB(f.db.dsn), timedOut(octx, err))
	}
	defer func() {
		if err := store.Close(); err != nil {
			log.Error("close store", "err", err.Error())
		}
	}()
	if err := store.Probe(octx); err != nil {
		return fmt.Errorf("store not writable, refusing to start: %w", timedOut(octx, err))
	}
	cancel()
	var tlsConfig *tls.Config
	if f.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return fmt.Errorf("load TLS certificate: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	api, err := httpapi.New(httpapi.Config{Store: store, Logger: log, Build: buildinfo.Read(), SessionTTL: f.sessionTTL, SecureCookies: f.secureCookies,
		StoreTimeout: f.db.timeout})
	if err != nil {
		return fmt.Errorf("new api: %w", err)
	}
	err = httpserve.Run(ctx, httpserve.Config{
		Addr: f.listen, AddrFile: f.addrFile, Handler: api.Handler(), ShutdownTimeout: f.shutdownTimeout, TLS: tlsConfig,
		MaxConns: f.maxConns, MaxConnsPerClient: f.maxConnsPerClient, TrustedProxies: f.trustedProxies, ErrorBody: httpapi.ErrorBody,
		Logger: log, ListenAttrs: []slog.Attr{slog.String("db", dbKind(f.db.dsn)), slog.String("version", buildinfo.Read().Version)},
	})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

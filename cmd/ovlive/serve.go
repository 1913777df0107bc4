package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"openvibe.network/agentsandbox/internal/httpserve"
	"openvibe.network/agentsandbox/live/httpapi"
)

// serveFlags are the flags of `ovlive serve`.
type serveFlags struct {
	db              dbFlags
	listen          string
	addrFile        string
	shutdownTimeout time.Duration
}

func serveCmd(ctx context.Context, args []string, _ io.Reader, _, stderr io.Writer) int {
	var f serveFlags
	fs := newFlags("serve", "[--listen ADDR] [--db DSN] [--addr-file FILE]", stderr)
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "the `ADDR` to listen on (port 0 picks a free port)")
	fs.StringVar(&f.addrFile, "addr-file", "", "write the address actually listened on to `FILE` once listening")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a shutdown waits for requests in flight")
	f.db.register(fs)
	if code, ok := parse(fs, args, 0); !ok {
		return code
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	tuneRuntime()
	if err := serve(ctx, f, log); err != nil {
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
		// let the kernel run it at once: on 2 cores p99 fell from ~28 ms to
		// ~17 ms and throughput rose by ~15%.
		runtime.GOMAXPROCS(4)
	}
}

// serve runs the server until ctx ends, then shuts it down gracefully:
// requests in flight (check-ins being committed) finish, within the timeout.
func serve(ctx context.Context, f serveFlags, log *slog.Logger) error {
	store, err := openStore(ctx, f.db)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer func() {
		if err := store.Close(); err != nil {
			log.Error("close store", "err", err.Error())
		}
	}()
	api, err := httpapi.New(httpapi.Config{Store: store, Logger: log})
	if err != nil {
		return fmt.Errorf("new api: %w", err)
	}
	return httpserve.Run(ctx, httpserve.Config{
		Addr: f.listen, AddrFile: f.addrFile, Handler: api.Handler(), ShutdownTimeout: f.shutdownTimeout,
		Logger: log, ListenAttrs: []slog.Attr{slog.String("db", dbKind(f.db.dsn))},
	})
}

// dbKind names the store without the rest of the DSN (which may hold a
// password).
func dbKind(dsn string) string {
	if len(dsn) >= 7 && dsn[:7] == "sqlite:" {
		return "sqlite"
	}
	return "postgres"
}

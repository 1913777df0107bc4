package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"time"

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
		log.Error("serve failed", "error", err.Error())
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
			log.Error("close store", "error", err.Error())
		}
	}()
	api, err := httpapi.New(httpapi.Config{Store: store, Logger: log})
	if err != nil {
		return fmt.Errorf("new api: %w", err)
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	addr := ln.Addr().String()
	srv := &http.Server{
		Handler:           api.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if f.addrFile != "" {
		if err := writeFileAtomic(f.addrFile, addr+"\n"); err != nil {
			_ = srv.Close()
			return err
		}
	}
	// Logged last: once this line is out, the address file is written too.
	log.Info("listening", "addr", addr, "db", dbKind(f.db.dsn))
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", f.shutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), f.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("stopped")
	return nil
}

// dbKind names the store without the rest of the DSN (which may hold a
// password).
func dbKind(dsn string) string {
	if len(dsn) >= 7 && dsn[:7] == "sqlite:" {
		return "sqlite"
	}
	return "postgres"
}

// writeFileAtomic writes data to path through a temporary file and a rename,
// so a reader never sees half of it.
func writeFileAtomic(path, data string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".addr-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := tmp.WriteString(data)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

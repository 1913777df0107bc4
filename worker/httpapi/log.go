package httpapi

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// logWriter records the status of a response and whether anything was
// written, for the request's log line and for endpoint.
type logWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

// WriteHeader records the status.
func (lw *logWriter) WriteHeader(status int) {
	if !lw.wrote {
		lw.status, lw.wrote = status, true
	}
	lw.ResponseWriter.WriteHeader(status)
}

// Write records an implicit 200.
func (lw *logWriter) Write(p []byte) (int, error) {
	if !lw.wrote {
		lw.status, lw.wrote = http.StatusOK, true
	}
	return lw.ResponseWriter.Write(p)
}

// Hijack hands the connection to a WebSocket (logged as 101).
func (lw *logWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(lw.ResponseWriter).Hijack()
	if err == nil && !lw.wrote {
		lw.status, lw.wrote = http.StatusSwitchingProtocols, true
	}
	return c, rw, err
}

// Unwrap lets http.ResponseController reach the connection (flush and write
// deadlines).
func (lw *logWriter) Unwrap() http.ResponseWriter { return lw.ResponseWriter }

// logAttrs collects the attributes handlers add to their request's line.
type logAttrs struct {
	mu    sync.Mutex
	attrs []slog.Attr
}

type logAttrsKey struct{}

// addLog adds attributes to the request's log line (a no-op outside
// logRequests).
func addLog(ctx context.Context, attrs ...slog.Attr) {
	if la, ok := ctx.Value(logAttrsKey{}).(*logAttrs); ok {
		la.mu.Lock()
		la.attrs = append(la.attrs, attrs...)
		la.mu.Unlock()
	}
}

// logRequests writes one line per request: method, route, status (0 when
// the answer was cut off), sandbox id, duration and what the handler added
// (at level error for a 5xx or a cut-off answer). It never logs headers or bodies,
// so neither the token nor stdin reaches the log.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		la := &logAttrs{}
		lw := &logWriter{ResponseWriter: w}
		r = r.WithContext(context.WithValue(r.Context(), logAttrsKey{}, la))
		defer func() {
			status := lw.status
			if !lw.wrote {
				status = http.StatusOK
			}
			if v := recover(); v != nil {
				status = 0 // aborted mid-answer
				defer panic(v)
			}
			attrs := []slog.Attr{
				slog.String("method", r.Method),
				slog.String("route", r.Pattern),
				slog.Int("status", status),
				slog.String("sandbox_id", r.PathValue("id")),
				slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
			}
			la.mu.Lock()
			attrs = append(attrs, la.attrs...)
			la.mu.Unlock()
			level := slog.LevelInfo
			if status >= 500 || status == 0 {
				level = slog.LevelError
			}
			s.cfg.Logger.LogAttrs(r.Context(), level, "worker api request", attrs...)
		}()
		next.ServeHTTP(lw, r)
	})
}

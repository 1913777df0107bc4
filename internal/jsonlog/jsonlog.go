// Package jsonlog is a slog.Handler that writes the very lines
// slog.JSONHandler writes, at a fraction of the cost for the records a
// server writes on every request: a record whose attributes are all
// strings, integers, finite floats, booleans, durations or times is encoded
// here, without reflection (slog.JSONHandler encodes every float through
// encoding/json); any other record, every record when HandlerOptions has a
// ReplaceAttr or AddSource, and every handler made by WithAttrs or
// WithGroup, is slog.JSONHandler's own.
package jsonlog

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Handler writes JSON lines as slog.JSONHandler does. Make one with
// NewHandler; it is safe for concurrent use.
type Handler struct {
	fast  bool // records may be encoded here (no ReplaceAttr, no AddSource)
	level slog.Leveler
	w     *lockedWriter
	inner *slog.JSONHandler
	bufs  *sync.Pool // of *[]byte, for the lines encoded here
}

// NewHandler returns a Handler writing to w with opts (nil means the
// defaults), as slog.NewJSONHandler(w, opts) would.
func NewHandler(w io.Writer, opts *slog.HandlerOptions) *Handler {
	if opts == nil {
		opts = &slog.HandlerOptions{}
	}
	lw := &lockedWriter{w: w}
	h := &Handler{fast: opts.ReplaceAttr == nil && !opts.AddSource, level: opts.Level, w: lw, inner: slog.NewJSONHandler(lw, opts),
		bufs: &sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}}
	if h.level == nil {
		h.level = slog.LevelInfo
	}
	return h
}

// Enabled reports whether level is at least the handler's level.
func (h *Handler) Enabled(_ context.Context, level slog.Level) bool {
	return level >= h.level.Level()
}

// WithAttrs returns slog.JSONHandler's handler with attrs.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler { return h.inner.WithAttrs(attrs) }

// WithGroup returns slog.JSONHandler's handler with the group name.
func (h *Handler) WithGroup(name string) slog.Handler { return h.inner.WithGroup(name) }

// Handle writes r as one JSON line in one Write.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if !h.fast {
		return h.inner.Handle(ctx, r)
	}
	bp := h.bufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooled {
			h.bufs.Put(bp)
		}
	}()
	b, ok := appendRecord((*bp)[:0], r)
	*bp = b
	if !ok {
		return h.inner.Handle(ctx, r)
	}
	_, err := h.w.Write(b)
	return err
}

// maxPooled bounds the buffers kept for reuse.
const maxPooled = 16 << 10

// jsonYear reports whether t's year has the four digits RFC 3339 allows
// (slog.JSONHandler reports an error in the line otherwise).
func jsonYear(t time.Time) bool {
	y := t.Year()
	return y >= 0 && y < 10000
}

// appendRecord appends r's line to b, as slog.JSONHandler writes it. It
// stops with false at the first value appendValue does not encode as
// slog.JSONHandler does (see plain); b is then unfinished.
func appendRecord(b []byte, r slog.Record) ([]byte, bool) {
	b = append(b, '{')
	if !r.Time.IsZero() {
		if !jsonYear(r.Time) {
			return b, false
		}
		b = append(b, `"time":`...)
		b = appendTime(b, r.Time.Round(0))
		b = append(b, ',')
	}
	b = append(b, `"level":`...)
	b = appendString(b, r.Level.String())
	b = append(b, `,"msg":`...)
	b = appendString(b, r.Message)
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		if ok = plain(a.Value); !ok {
			return false
		}
		b = append(b, ',')
		b = appendString(b, a.Key)
		b = append(b, ':')
		b = appendValue(b, a.Value)
		return true
	})
	return append(b, '}', '\n'), ok
}

// plain reports whether appendValue encodes v as slog.JSONHandler does:
// strings, integers, booleans, durations, finite floats and times with a
// four-digit year.
func plain(v slog.Value) bool {
	switch v.Kind() {
	case slog.KindString, slog.KindInt64, slog.KindUint64, slog.KindBool, slog.KindDuration:
		return true
	case slog.KindFloat64:
		return !math.IsNaN(v.Float64()) && !math.IsInf(v.Float64(), 0)
	case slog.KindTime:
		return jsonYear(v.Time())
	default:
		return false
	}
}

// appendValue appends v, which plain allows, as slog.JSONHandler does.
func appendValue(b []byte, v slog.Value) []byte {
	switch v.Kind() {
	case slog.KindString:
		return appendString(b, v.String())
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindFloat64:
		return appendFloat(b, v.Float64())
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool())
	case slog.KindDuration:
		return strconv.AppendInt(b, int64(v.Duration()), 10)
	default: // slog.KindTime
		return appendTime(b, v.Time())
	}
}

// appendTime appends t as time.Time.MarshalJSON does.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendFloat appends the finite f as encoding/json encodes a float64.
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 is written e-9, as encoding/json does.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendString appends s quoted as slog.JSONHandler quotes it: as
// encoding/json does without escaping HTML.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[c&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// lockedWriter serialises the Writes of the fast path and of
// slog.JSONHandler's, which hold different locks.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

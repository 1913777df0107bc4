package jsonlog

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"runtime"
	"testing"
	"time"
)

// lines returns what slog.JSONHandler and Handler write for r.
func lines(opts *slog.HandlerOptions, r slog.Record) (want, got string) {
	var a, b bytes.Buffer
	_ = slog.NewJSONHandler(&a, opts).Handle(context.Background(), r.Clone())
	_ = NewHandler(&b, opts).Handle(context.Background(), r.Clone())
	return a.String(), b.String()
}

// pc is a program counter for the records of AddSource.
func pc() uintptr {
	var pcs [1]uintptr
	runtime.Callers(2, pcs[:])
	return pcs[0]
}

// TestSameLines checks that every record is written byte for byte as
// slog.JSONHandler writes it, those encoded here and those handed to it.
func TestSameLines(t *testing.T) {
	at := time.Date(2026, 12, 3, 7, 8, 9, 123456789, time.UTC)
	for _, tc := range []struct {
		name  string
		opts  *slog.HandlerOptions
		level slog.Level
		msg   string
		attrs []slog.Attr
	}{
		{name: "Empty", msg: ""},
		{name: "Request", msg: "request", attrs: []slog.Attr{slog.String("route", "checkin"), slog.String("method", "POST"),
			slog.Int("status", 200), slog.String("principal", "svc_x"), slog.Float64("duration_ms", 10.112),
			slog.String("outcome", "accepted"), slog.String("code", "")}},
		{name: "Escapes", msg: "a\"b\\c\nd\re\tf\x00g\x1fh\x7f<>&", attrs: []slog.Attr{slog.String("k\"ey\n", "\u2028\u2029 é 😀 \xff\xfe end")}},
		{name: "Integers", msg: "n", attrs: []slog.Attr{slog.Int64("min", math.MinInt64), slog.Uint64("max", math.MaxUint64), slog.Bool("t", true), slog.Bool("f", false)}},
		{name: "Floats", msg: "f", attrs: []slog.Attr{slog.Float64("zero", 0), slog.Float64("neg0", math.Copysign(0, -1)),
			slog.Float64("small", 1e-7), slog.Float64("edge", 1e-6), slog.Float64("tiny", 5e-324), slog.Float64("big", 1e21),
			slog.Float64("under", 999999999999999999999.0), slog.Float64("max", math.MaxFloat64), slog.Float64("third", 1.0/3),
			slog.Float64("neg", -2.5e-9), slog.Float64("int", 42)}},
		{name: "DurationAndTime", msg: "d", attrs: []slog.Attr{slog.Duration("d", 1500*time.Millisecond),
			slog.Time("t", at), slog.Time("zone", at.In(time.FixedZone("x", -5*3600)))}},
		{name: "Level", level: slog.LevelWarn + 2, msg: "w"},
		// Handed to slog.JSONHandler:
		{name: "NaN", msg: "nan", attrs: []slog.Attr{slog.Float64("x", math.NaN()), slog.Float64("y", math.Inf(1))}},
		{name: "Group", msg: "g", attrs: []slog.Attr{slog.Group("g", slog.Int("a", 1)), slog.Group("empty")}},
		{name: "Any", msg: "any", attrs: []slog.Attr{slog.Any("err", errors.New("boom")), slog.Any("list", []int{1, 2}), slog.Any("nil", nil)}},
		{name: "YearOutOfRange", msg: "y", attrs: []slog.Attr{slog.Time("t", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))}},
		{name: "ReplaceAttr", opts: &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == "drop" {
				return slog.Attr{}
			}
			return a
		}}, msg: "r", attrs: []slog.Attr{slog.String("drop", "x"), slog.String("keep", "y")}},
		{name: "AddSource", opts: &slog.HandlerOptions{AddSource: true}, msg: "s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := slog.NewRecord(at, tc.level, tc.msg, pc())
			r.AddAttrs(tc.attrs...)
			want, got := lines(tc.opts, r)
			if got != want {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// TestTimeless checks a record without a time, and that the handlers made
// by WithAttrs and WithGroup write as slog.JSONHandler's do.
func TestTimeless(t *testing.T) {
	for _, tc := range []struct {
		name string
		fill func(h slog.Handler)
	}{
		{"NoTime", func(h slog.Handler) {
			_ = h.Handle(context.Background(), slog.NewRecord(time.Time{}, slog.LevelInfo, "m", 0))
		}},
		{"WithAttrs", func(h slog.Handler) {
			slog.New(h.WithAttrs([]slog.Attr{slog.String("a", "b")})).Info("m", "c", 1)
		}},
		{"WithGroup", func(h slog.Handler) { slog.New(h.WithGroup("g")).Info("m", "c", 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a, b bytes.Buffer
			tc.fill(slog.NewJSONHandler(&a, nil))
			tc.fill(NewHandler(&b, nil))
			// Lines with a time differ in it; compare what follows.
			strip := func(s string) string {
				if i := bytes.Index([]byte(s), []byte(`"level"`)); i >= 0 {
					return s[i:]
				}
				return s
			}
			if strip(a.String()) != strip(b.String()) || a.Len() == 0 {
				t.Fatalf("got  %s\nwant %s", b.String(), a.String())
			}
		})
	}
}

// TestEnabled checks the level option.
func TestEnabled(t *testing.T) {
	h := NewHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelWarn})
	if h.Enabled(context.Background(), slog.LevelInfo) || !h.Enabled(context.Background(), slog.LevelWarn) {
		t.Fatal("Enabled does not follow the level option")
	}
	if d := NewHandler(&bytes.Buffer{}, nil); d.Enabled(context.Background(), slog.LevelDebug) || !d.Enabled(context.Background(), slog.LevelInfo) {
		t.Fatal("the default level is not info")
	}
}

// FuzzSameLines checks random strings and numbers against slog.JSONHandler.
func FuzzSameLines(f *testing.F) {
	f.Add("msg", "key", "value", 1.5, int64(-3))
	f.Add("\xff", "\u2028", "\x00\"\\", 1e-7, int64(0))
	f.Fuzz(func(t *testing.T, msg, key, value string, x float64, n int64) {
		r := slog.NewRecord(time.Unix(1796000000, int64(n)%1e9), slog.LevelInfo, msg, 0)
		r.AddAttrs(slog.String(key, value), slog.Float64("x", x), slog.Int64("n", n))
		if want, got := lines(nil, r); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	})
}

// BenchmarkRequestLine measures a request's log line through
// slog.JSONHandler and through Handler.
func BenchmarkRequestLine(b *testing.B) {
	for _, tc := range []struct {
		name string
		h    slog.Handler
	}{
		{"slog.JSONHandler", slog.NewJSONHandler(discard{}, nil)},
		{"jsonlog.Handler", NewHandler(discard{}, nil)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				r := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
				r.AddAttrs(slog.String("route", "checkin"), slog.String("method", "POST"), slog.Int("status", 200),
					slog.String("principal", "svc_ZXGhUz1HrfWZaDUV"), slog.String("stream", "bench-003"),
					slog.Float64("duration_ms", 10.112), slog.String("outcome", "accepted"), slog.String("code", ""),
					slog.String("reason", "subject_owns_stream"))
				_ = tc.h.Handle(ctx, r)
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

package httpapi

import (
	"fmt"
	"time"

	"openvibe.network/agentsandbox/live"
)

// timelineWidth is the SVG's width in user units: one per minute of 24 h.
const timelineWidth = 1440

// timeline is the owner's page's bar of the stream's last 24 h, drawn by the
// server as inline SVG (no script, no external asset).
type timeline struct {
	Width    int
	Rects    []timelineRect
	Uptime   float64 // percent of the span alive without a problem
	Degraded float64 // percent of the span alive but degraded
	Span     string  // what the uptime is of: "the last 24 hours", or since creation
	From, To string
}

// timelineRect is one segment of the bar; Class is its state.
type timelineRect struct {
	X, W  float64
	Class string
	Title string
}

// timelineOf draws h (a history over [From, To]) as a bar; time before the
// stream existed is left blank.
func timelineOf(h historyView, created time.Time) timeline {
	span := h.To.Sub(h.From)
	tl := timeline{Width: timelineWidth, Uptime: h.UptimePercent, Degraded: h.DegradedPercent, From: formatTime(h.From), To: formatTime(h.To),
		Span: fmt.Sprintf("the last %d hours", int(span.Hours()))}
	if created.After(h.From) {
		tl.Span = "the " + roughDuration(h.To.Sub(created)) + " since the stream was created"
	}
	if span <= 0 {
		return tl
	}
	scale := timelineWidth / span.Seconds()
	for _, s := range h.Segments {
		x := s.From.Sub(h.From).Seconds() * scale
		w := s.To.Sub(s.From).Seconds() * scale
		tl.Rects = append(tl.Rects, timelineRect{X: round2(x), W: round2(max(w, 0.5)), Class: string(s.State),
			Title: fmt.Sprintf("%s from %s to %s", stateWords(s.State), formatTime(s.From), formatTime(s.To))})
	}
	return tl
}

// stateWords says a history state for a person.
func stateWords(s live.State) string {
	if s == live.StateDegraded {
		return "alive, with a problem the worker reported,"
	}
	return string(s)
}

// roughDuration says d in the largest whole unit that fits.
func roughDuration(d time.Duration) string {
	switch {
	case d >= 2*time.Hour:
		return live.Plural(int64(d.Hours()), "hour")
	case d >= 2*time.Minute:
		return live.Plural(int64(d.Minutes()), "minute")
	}
	return live.Plural(int64(d.Seconds()), "second")
}

func round2(x float64) float64 { return float64(int(x*100+0.5)) / 100 }

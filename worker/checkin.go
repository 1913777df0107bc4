package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/client"
)

// Defaults of CheckInConfig.
const (
	DefaultCheckInInterval = 20 * time.Second
	DefaultJitter          = 0.2
	DefaultBackoffBase     = time.Second
	DefaultBackoffCap      = 2 * time.Minute
)

// Live is what the check-in loop needs of a Live; *client.Live implements it.
// CheckIn returns an error only when no answer arrived.
type Live interface {
	CheckIn(ctx context.Context, stream, subject string, report []byte) (client.CheckInAnswer, error)
}

var _ Live = (*client.Live)(nil)

// Target is one (Live, stream, subject) the worker checks in with.
type Target struct {
	// LiveURL names the Live in logs (it carries no secret).
	LiveURL string
	Stream  string
	// Subject is the person who owns the stream (X-OV-Subject).
	Subject string
	Live    Live
}

// CheckInConfig configures RunCheckIns. Targets and Report are required.
type CheckInConfig struct {
	Targets []Target
	// Report builds the report at time now (called once per check-in round
	// of a target, so capacity/active are current).
	Report func(now time.Time) agentsandbox.WorkerCheckIn
	// Interval between check-ins (default 20 s), varied by ±Jitter (default
	// 0.2, i.e. ±20 %).
	Interval time.Duration
	Jitter   float64
	// BackoffBase and BackoffCap bound the exponential backoff after a
	// check-in that got no answer, a 5xx or a 429 (defaults 1 s and 2 min).
	BackoffBase, BackoffCap time.Duration
	Logger                  *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Sleep waits d or until ctx is done (default: a timer); tests inject it.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, 1) for the jitter (default math/rand/v2).
	Rand func() float64
}

func (c *CheckInConfig) defaults() {
	if c.Interval <= 0 {
		c.Interval = DefaultCheckInInterval
	}
	if c.Jitter <= 0 || c.Jitter >= 1 {
		c.Jitter = DefaultJitter
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffCap <= 0 {
		c.BackoffCap = DefaultBackoffCap
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Sleep == nil {
		c.Sleep = sleepTimer
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
}

func sleepTimer(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// RunCheckIns checks in with every target at once and then every Interval
// (with jitter), backing off exponentially up to BackoffCap while a Live
// does not answer, until ctx is done. It returns an error only for a bad
// configuration (no target, no report builder).
func RunCheckIns(ctx context.Context, cfg CheckInConfig) error {
	if len(cfg.Targets) == 0 || cfg.Report == nil {
		return fmt.Errorf("run check-ins: need at least one target and a report builder")
	}
	cfg.defaults()
	var wg sync.WaitGroup
	for _, t := range cfg.Targets {
		wg.Go(func() { loop(ctx, &cfg, t) })
	}
	wg.Wait()
	return nil
}

func loop(ctx context.Context, cfg *CheckInConfig, t Target) {
	failures := 0
	for ctx.Err() == nil {
		a, err := CheckIn(ctx, t, cfg.Report(cfg.Now()), cfg.Logger)
		if ctx.Err() != nil {
			return
		}
		if transient(a, err) {
			failures++
		} else {
			failures = 0
		}
		if cfg.Sleep(ctx, cfg.next(failures)) != nil {
			return
		}
	}
}

// transient reports whether the outcome is worth retrying sooner than the
// interval: no answer, an overloaded or failing Live.
func transient(a client.CheckInAnswer, err error) bool {
	return err != nil || a.Status == http.StatusTooManyRequests || a.Status >= 500
}

// next is the wait before the next check-in after failures transient
// failures in a row: the jittered interval, or the jittered backoff.
func (c *CheckInConfig) next(failures int) time.Duration {
	d := c.Interval
	if failures > 0 {
		d = c.BackoffBase << min(failures-1, 30)
		if d > c.BackoffCap || d <= 0 {
			d = c.BackoffCap
		}
	}
	return time.Duration(float64(d) * (1 + c.Jitter*(2*c.Rand()-1)))
}

// CheckIn sends report to t once and logs the outcome: a 422 with Live's
// errors (a report that does not claim every fact is sent all the same:
// Live refuses it and the owner sees why), a 401/403 as a configuration
// problem. The worker does not run the contract's validator itself: Live
// does, and the worker binary stays free of the JSON Schema engine (and its
// start-up cost). It returns Live's answer, or an error when the report
// cannot be encoded or no answer arrived.
func CheckIn(ctx context.Context, t Target, report agentsandbox.WorkerCheckIn, log *slog.Logger) (client.CheckInAnswer, error) {
	log = log.With("live", t.LiveURL, "stream", t.Stream, "subject", t.Subject)
	body, err := json.Marshal(report)
	if err != nil {
		return client.CheckInAnswer{}, fmt.Errorf("check in: encode report: %w", err)
	}
	start := time.Now()
	a, err := t.Live.CheckIn(ctx, t.Stream, t.Subject, body)
	took := time.Since(start)
	switch {
	case err != nil:
		log.Warn("check-in got no answer", "err", err, "duration_ms", took.Milliseconds())
		return a, err
	case a.OK():
		log.Info("checked in", "status", a.Status, "state", a.State, "duration_ms", took.Milliseconds())
	case a.Status == http.StatusUnprocessableEntity:
		log.Warn("check-in refused by the contract: not registered", "status", a.Status, "errors", a.Errors)
	case a.Status == http.StatusUnauthorized || a.Status == http.StatusForbidden:
		log.Error("check-in refused: check the service token, its capabilities, the subject and the stream",
			"status", a.Status, "code", a.Code, "message", a.Message)
	default:
		log.Warn("check-in refused", "status", a.Status, "code", a.Code, "message", a.Message)
	}
	return a, nil
}

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox/cgroup"
)

// Bounds of Options.
const (
	// MinTimeBox is the shortest time box (short ones serve tests).
	MinTimeBox = time.Second
	// startTimeout bounds a sandbox's start when ctx has no deadline.
	startTimeout = 30 * time.Second
)

// sandboxState is one running sandbox.
type sandboxState struct {
	id    string
	info  Info
	slot  *slot
	opts  Options
	group *cgroup.Group
	dir   string // the sandbox's host directory (see boxdir.go)
	// dirMade is set once the host directory exists (the wipe removes it).
	dirMade bool
	// control is an O_PATH descriptor of the control socket the init
	// accepts on; the runtime connects through it (unixsock.Dial).
	control *os.File
	// initPid is the host pid of the sandbox's pid 1 (the init).
	initPid int
	// bornInGroup is set when bubblewrap was started in the cgroup (v2).
	bornInGroup bool
	// pooled is set while the sandbox waits in the pool (under the
	// runtime's mu); poolIndex is the pool it was started for (poolHost,
	// poolBrowser, else an index of Config.PoolImages).
	pooled    bool
	poolIndex int
	cmd       *exec.Cmd
	exited    chan struct{} // closed once bubblewrap exited
	wiped     chan struct{} // closed once the wipe finished
	stderr    *tailBuffer
	detach    func()
	timer     *time.Timer
	// readyAt is when the sandbox first accepted commands: its time box
	// counts from there (under the runtime's mu, as timer and info are).
	readyAt time.Time
	direct  *directRun // set for a one-command sandbox (Runtime.Run)
	// secretEnv holds the placeholders and CA variables of a sandbox with
	// secrets (added to Options.Env for its commands), and caBundle the
	// host path of its trust bundle (see setupSecrets).
	secretEnv map[string]string
	caBundle  string
	// caDomains are the names its CA is constrained to (none: no CA);
	// secrets are what the proxy brokers for it now, and addedEnv the
	// placeholders of the secrets UpdateSecrets added, given to each
	// command started after (all three under secretsMu).
	secretsMu sync.Mutex
	caDomains []string
	secrets   []agentsandbox.EgressSecret
	addedEnv  map[string]string

	mu     sync.Mutex
	reason string // why the sandbox ended: time_box, deleted, memory, exited
	// broken says why the sandbox's init is taken for stalled (see
	// watchdog.go); empty while it answers.
	broken string
}

// setReason records why the sandbox ends (the first reason wins).
func (b *sandboxState) setReason(why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reason == "" {
		b.reason = why
	}
}

func (b *sandboxState) endReason() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reason
}

// resolve applies the defaults to o and validates it.
func resolve(o Options) (Options, error) {
	if o.TimeBox == 0 {
		o.TimeBox = agentsandbox.DefaultTimeBox
	}
	if o.TimeBox < MinTimeBox || o.TimeBox > agentsandbox.MaxTimeBox {
		return o, fmt.Errorf("time box %v is not within %v..%v", o.TimeBox, MinTimeBox, agentsandbox.MaxTimeBox)
	}
	o.Limits = o.Limits.WithDefaults()
	if err := o.Limits.Check(); err != nil {
		return o, fmt.Errorf("limit %w", err)
	}
	if o.Browser {
		if err := o.Limits.CheckBrowser(); err != nil {
			return o, fmt.Errorf("limit %w", err)
		}
	}
	if o.Image != nil {
		if o.Browser {
			return o, errors.New("a browser sandbox runs on the host's view, not an image")
		}
		if err := checkImage(o.Image); err != nil {
			return o, err
		}
	}
	if err := checkSecrets(o); err != nil {
		return o, err
	}
	for k, v := range o.Env {
		if !agentsandbox.ValidEnvName(k) {
			return o, fmt.Errorf("env name %q is not a valid variable name (letters, digits and _, not starting with a digit)", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return o, fmt.Errorf("env value of %q contains a NUL byte", k)
		}
	}
	return o, nil
}

// Create starts a sandbox with opts and returns once its init accepts
// commands. Errors: ErrCapacity when every slot is in use; an invalid option
// (time box outside 1s..30min, a negative limit, a bad env name, a bad
// image); a sandbox with egress on a runtime without Config.Egress;
// Options.SelfTest asked of the runtime rather than its self-test's view
// (SelfTest, whose Create sets it); an image sandbox on a runtime whose
// init is not static; or a failed start (its bubblewrap error included).
func (r *Runtime) Create(ctx context.Context, opts Options) (_ Info, err error) {
	opts.Image = opts.Image.once()
	defer func() {
		if err != nil {
			opts.Image.release()
		}
	}()
	if opts.SelfTest && !r.selfTest {
		return Info{}, errors.New("create sandbox: the self-test's sandboxes are created through Runtime.SelfTest")
	}
	opts.SelfTest = r.selfTest
	opts, err = resolve(opts)
	if err != nil {
		return Info{}, fmt.Errorf("create sandbox: %w", err)
	}
	if opts.Image != nil && !r.initStatic {
		return Info{}, fmt.Errorf("create sandbox: %w: %s", ErrNoImages, r.ImageProblems()[0])
	}
	if opts.Egress && r.cfg.Egress == nil {
		return Info{}, errors.New("create sandbox: egress requested but this runtime has no egress proxy")
	}
	if opts.Browser && r.cfg.Browser == "" {
		return Info{}, fmt.Errorf("create sandbox: a browser requested but this runtime has none (Config.Browser): %w", ErrNoBrowser)
	}
	if p := r.cfg.HostProblems; len(p) > 0 {
		return Info{}, fmt.Errorf("create sandbox: %w: %s", ErrHost, strings.Join(p, "; "))
	}
	if p := r.LimitProblems(); len(p) > 0 && !opts.SelfTest {
		return Info{}, fmt.Errorf("create sandbox: %w: %s", ErrLimits, strings.Join(p, "; "))
	}
	start := time.Now()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	b, pooled, err := r.obtain(ctx, opts)
	if err != nil {
		return Info{}, err
	}
	if opts.SelfTest && opts.Browser && r.cfg.PoolBrowser > 0 {
		// The self-test proves the browser tenants get: with a browser pool,
		// one whose Chromium was started ahead by the pool's own step and
		// answered a client that left (under the check's egress policy,
		// attached at the start: its guarantee holds).
		if err := r.warmBrowser(ctx, b); err != nil {
			r.wipe(b, "deleted")
			return Info{}, fmt.Errorf("create sandbox: start its browser as the browser pool does: %w", err)
		}
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.wipe(b, "deleted")
		return Info{}, errors.New("create sandbox: runtime is closed")
	}
	r.boxes[b.id] = b
	// The time box counts from the moment the sandbox accepts commands, and
	// ExpiresAt says exactly when its timer fires.
	b.readyAt = r.cfg.Now()
	b.info.ExpiresAt = b.readyAt.Add(opts.TimeBox)
	b.timer = time.AfterFunc(opts.TimeBox, func() { r.endSandbox(b.id, "time_box") })
	r.mu.Unlock()
	go r.watch(b)
	r.log.Info("sandbox created", "sandbox", b.id, "slot", b.slot.index, "uid", b.slot.uid, "pooled", pooled,
		"egress", opts.Egress, "image", b.info.Image, "image_digest", b.info.ImageDigest,
		"time_box_s", opts.TimeBox.Seconds(), "duration_ms", durationMS(time.Since(start)))
	r.wakePool()
	return b.info, nil
}

// obtain gives Create a started sandbox for opts: one from the pool when it
// can serve opts, else a new one in a free slot (evicting a pooled one when
// no slot is free). pooled says which.
func (r *Runtime) obtain(ctx context.Context, opts Options) (b *sandboxState, pooled bool, err error) {
	if r.poolable(opts) {
		if b := r.takePooled(opts); b != nil {
			if err := r.adopt(ctx, b, opts); err != nil {
				return nil, false, fmt.Errorf("create sandbox: %w", err)
			}
			return b, true, nil
		}
	}
	for {
		b, err = r.claim(opts)
		if !errors.Is(err, ErrCapacity) {
			break
		}
		if r.evictPooled() {
			continue
		}
		// Every slot is taken, one perhaps by a pooled sandbox still
		// starting: wait for it rather than refuse.
		changed, starting := r.poolStartingNow()
		if !starting {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, false, fmt.Errorf("create sandbox: %w", ctx.Err())
		}
		if r.poolable(opts) {
			if b := r.takePooled(opts); b != nil {
				if err := r.adopt(ctx, b, opts); err != nil {
					return nil, false, fmt.Errorf("create sandbox: %w", err)
				}
				return b, true, nil
			}
		}
	}
	if err != nil {
		return nil, false, err
	}
	if err := r.start(ctx, b); err != nil {
		rep := r.wipe(b, "deleted")
		r.log.Error("sandbox start failed", "sandbox", b.id, "slot", b.slot.index, "err", err, "wipe_verified", rep.Verified)
		return nil, false, fmt.Errorf("create sandbox: %w", err)
	}
	return b, false, nil
}

// claim takes a free slot for a new sandbox: the self-test's own slot for
// a sandbox with opts.SelfTest (when the runtime keeps one), else one of the
// others.
func (r *Runtime) claim(opts Options) (*sandboxState, error) {
	id := randomID()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("create sandbox: runtime is closed")
	}
	for _, s := range r.slots {
		if s.current != nil || s.broken != "" || s.selfTest != (opts.SelfTest && r.cfg.SelfTestSlot) {
			continue
		}
		now := r.cfg.Now()
		b := &sandboxState{
			id: id, slot: s, opts: opts, dir: r.boxPath(id),
			exited: make(chan struct{}), wiped: make(chan struct{}),
			info: Info{
				ID: id, Slot: s.index, HostUID: s.uid, Egress: opts.Egress, EgressPolicy: opts.EgressPolicy,
				Secrets: secretHosts(opts.Secrets), Browser: opts.Browser, CreatedAt: now, Limits: opts.Limits,
			},
		}
		if opts.Image != nil {
			b.info.Image, b.info.ImageDigest = opts.Image.Ref, opts.Image.Digest
		}
		s.current = b
		return b, nil
	}
	return nil, ErrCapacity
}

// watch ends the sandbox when bubblewrap exits on its own (its init died,
// or the memory limit killed it).
func (r *Runtime) watch(b *sandboxState) {
	<-b.exited
	why := "exited"
	if ev, err := b.group.Events(); err == nil && ev.OOMKills > 0 {
		why = "memory"
	}
	pooled := r.removePooled(b) // it died while it waited in the pool
	if !pooled {
		if _, live := r.takeBox(b.id); !live {
			return // deleted: its wipe is under way
		}
	}
	// What bubblewrap and the init last wrote says why (a Go runtime's
	// fatal error, a limit); it is the sandbox's, so it is clipped and
	// quoted, never trusted.
	r.log.Warn("sandbox ended on its own", "sandbox", b.id, "slot", b.slot.index, "reason", why, "pooled", pooled,
		"exit", b.cmd.ProcessState.String(), "stderr", clipStderr(b.stderr.String()))
	r.wipe(b, why)
}

// clipStderr is the end of a sandbox's bubblewrap stderr, for a log line.
func clipStderr(s string) string {
	const most = 512
	s = strings.ToValidUTF8(strings.TrimSpace(s), "?")
	if len(s) > most {
		s = "…" + strings.ToValidUTF8(s[len(s)-most:], "")
	}
	return s
}

// endSandbox removes a sandbox from the runtime and wipes it, for why.
func (r *Runtime) endSandbox(id, why string) {
	if b, ok := r.takeBox(id); ok {
		r.wipe(b, why)
	}
}

// takeBox removes sandbox id from the runtime's sandboxes (either view's)
// and returns it; false when it is not there (another caller took it
// first).
func (r *Runtime) takeBox(id string) (*sandboxState, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.boxes[id]
	delete(r.boxes, id)
	return b, ok
}

// Delete ends a sandbox of this view (see SelfTest): it kills every
// process, removes its files and cgroup, and verifies that nothing is
// left. A running Exec in it ends with reason "deleted". Errors:
// ErrNotFound (another view's sandbox too). A wipe that could not be
// verified is not an error: the report says what is left (and the slot
// stays out of use).
func (r *Runtime) Delete(_ context.Context, id string) (WipeReport, error) {
	r.mu.Lock()
	b, ok := r.boxes[id]
	if ok && r.sees(b) {
		delete(r.boxes, id)
	}
	r.mu.Unlock()
	if !ok || !r.sees(b) {
		return WipeReport{}, ErrNotFound
	}
	return r.wipe(b, "deleted"), nil
}

// tailBuffer keeps the last few KiB written to it (a start failure's
// bubblewrap error).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailMax = 4 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailMax {
		t.buf = t.buf[len(t.buf)-tailMax:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

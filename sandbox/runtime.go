package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"openvibe.network/agentsandbox/sandbox/cgroup"
	"openvibe.network/agentsandbox/sandbox/seccomp"
)

// Defaults of Config.
const (
	DefaultCapacity = 2
	// MaxCapacity bounds the slots of one runtime.
	MaxCapacity     = 4096
	DefaultStateDir = "/run/codes-sandbox"
	DefaultUIDBase  = 200000
	// DefaultMaxOpenFiles is each sandbox process's descriptor limit.
	DefaultMaxOpenFiles = 4096
	// DefaultMaxPtys is how many pseudo-terminals a sandbox may hold.
	DefaultMaxPtys = 32
	// maxSocketPath is the size of sun_path.
	maxSocketPath = 108
	// uidRange is how far above UIDBase the runtime looks for free uids.
	uidRange = 65536
)

// Config of a Runtime. Zero fields take the defaults.
type Config struct {
	// Capacity is the number of slots (default 2).
	Capacity int
	// Bwrap is the bubblewrap program (default: "bwrap" looked up in PATH).
	Bwrap string
	// InitBinary is the program started as the init inside each sandbox
	// (default os.Executable(): this program, re-executed); it must call
	// inside.MaybeRun first thing and be built from the same sources as this
	// program. A small program that links little else starts faster, and
	// every Create waits for it (the worker uses codes-sandbox-init).
	InitBinary string
	// StateDir holds the runtime's files (default /run/codes-sandbox): a
	// root-owned 0755 directory every parent of which others may traverse.
	StateDir string
	// UIDBase is the first host uid tried for slots (default 200000); each
	// slot runs as its own host uid (and gid) at or above it, never 0. Uids
	// are reserved by lock files in /run/codes-sandbox/uids (whatever
	// StateDir), so no two runtimes on the host share a uid.
	UIDBase int
	// Egress attaches sandboxes created with Options.Egress to the proxy;
	// nil: such sandboxes are refused.
	Egress EgressAttacher
	// MaxOpenFiles is the descriptor limit (RLIMIT_NOFILE, soft and hard) of
	// every sandbox process (default DefaultMaxOpenFiles). A sandbox holds at
	// most Pids × MaxOpenFiles open files of the host's table.
	MaxOpenFiles int
	// ControlTimeout bounds how long a call waits on a sandbox's init
	// without hearing from it before it pings the init, and how long the
	// ping waits (default DefaultControlTimeout): an init that does not
	// answer it marks its sandbox broken (ErrBroken, Info.Broken).
	ControlTimeout time.Duration
	// MaxPtys is how many pseudo-terminals one sandbox may hold at once, in
	// its own devpts instance (default DefaultMaxPtys).
	MaxPtys int
	// Pool is how many sandboxes to keep started ahead, in free slots, for
	// Create to hand out at once (at most Capacity; default 0: none). They
	// have the default limits, no environment and egress when PoolEgress;
	// Create gives one its own limits and environment, and each is still
	// single-use and wiped on delete.
	Pool int
	// Browser is the host path of Chromium's binary (under /usr; see
	// FindBrowser) for sandboxes created with Options.Browser. Empty: no
	// browser sandboxes.
	Browser string
	// PoolEgress starts the pooled sandboxes with egress; only a Create with
	// the same Egress takes one.
	PoolEgress bool
	// PoolImages are pools of image sandboxes, beside Pool (all the pools
	// together at most Capacity): a Create of an image with the same
	// digest takes one of its sandboxes.
	PoolImages []PoolImage
	// PoolBrowser is how many browser sandboxes to keep started ahead,
	// beside Pool and PoolImages (all together at most Capacity), each with
	// its Chromium already started and answering (see pool.go); it needs
	// Browser.
	PoolBrowser int
	// CgroupParent is where the sandboxes' cgroups go, below each cgroup
	// mount ("codes-sandbox"; several levels allowed). Empty: on cgroup v2
	// in a systemd service, below the service's own (delegated) cgroup,
	// else "codes-sandbox".
	CgroupParent string
	// SelfTestSlot reserves one more slot (and host uid) for sandboxes
	// created with Options.SelfTest, which no other sandbox uses: a worker
	// whose every slot is busy can still prove its facts. Without it such
	// sandboxes take an ordinary slot.
	SelfTestSlot bool
	// HostProblems say why this host cannot run sandboxes (see packages
	// hostcheck and hostprep), each with its fix: while there are any,
	// Create fails with ErrHost naming them and the pool stays empty,
	// instead of bubblewrap failing with a message of its own.
	HostProblems []string
	// OnWipe, when set, is called after every wipe (a pooled sandbox's and a
	// failed start's included) with why the sandbox ended and the report;
	// it must return quickly (the worker counts wipes and their failures).
	OnWipe func(reason string, rep WipeReport)
	// Logger receives one line per sandbox run and wipe problems (default:
	// discard).
	Logger *slog.Logger
	// Now is the clock of CreatedAt and ExpiresAt (default time.Now).
	Now func() time.Time
}

// Runtime owns the slots of one worker and the sandboxes in them. It is safe
// for concurrent use.
//
// The self-test's sandboxes are kept apart: only the self-test's view of
// the runtime (SelfTest) creates them, finds them by id and lists them; the
// runtime itself, which the API serves, never does, nor counts them in
// Active. A client that deletes every sandbox it lists cannot touch the
// self-test's probes.
type Runtime struct {
	*core
	// selfTest is set on the self-test's view (SelfTest): it sees only the
	// sandboxes created with Options.SelfTest, the runtime only the others.
	selfTest bool
}

// core is the state a runtime and its self-test's view share.
type core struct {
	cfg Config
	// oomUnset is set once the kernel refused a sandbox's oom_score_adj
	// (the worker lacks CAP_DAC_OVERRIDE or CAP_SYS_RESOURCE), so that the
	// warning is logged once.
	oomUnset atomic.Bool
	base     *cgroup.Hierarchy // the cgroup parent every runtime shares
	cg       *cgroup.Hierarchy // this runtime's own directory below base
	seccomp  []byte
	name     string   // rt-<random>: this runtime's directory and cgroup name
	dir      string   // this runtime's directory under StateDir
	dirLock  *os.File // held while the runtime lives (see removeStale)
	init     string   // the copied init binary
	prlimit  string   // what sets a one-command sandbox's limits (findPrlimit); "": the init's shim
	// view is what the host sees of a one-command sandbox's files as they
	// will be (see Runtime.firstProcess); the zero view in tests that
	// start every such sandbox with prlimit or the shim.
	view   commandView
	etcDir string // the /etc its sandboxes bind (see buildEtc)
	// etcBinds are the host /etc directories bound over it (etcBinds).
	etcBinds []string
	etcLock  *os.File // shared lock on etcDir, held while the runtime lives
	// initBind and etcBind are the host paths sandboxes bind the init and
	// /etc from: through the runtime's read-only views (mountViews), or
	// init and etcDir themselves on a host that refuses those.
	initBind, etcBind string
	// procMask is what sandboxes' /proc hides, decided once from the
	// host's (hostProcMask).
	procMask ProcMask
	links    map[string]string
	log      *slog.Logger
	// initStatic says whether the init binary needs no dynamic loader, as
	// an image's root may have none (image sandboxes need it).
	initStatic bool
	// idmaps are the user namespaces of image sandboxes' idmapped layers.
	idmaps idmaps
	// janitor is woken (non-blocking send) when there is something to
	// clean up: a dead runtime's leftovers, a slot whose wipe failed.
	janitor     chan struct{}
	janitorDone chan struct{}

	// The pool's filler (see pool.go): poolWake wakes it, poolStop stops
	// it, poolDone is closed when it stopped.
	poolWake, poolStop, poolDone chan struct{}

	mu           sync.Mutex
	pool         []*sandboxState // started ahead, never used
	poolStarting int             // pooled sandboxes being started
	// poolStartingOf counts them per pool (-1: the host's view's, else an
	// index of Config.PoolImages).
	poolStartingOf map[int]int
	poolChanged    chan struct{} // closed (and replaced) when poolStarting falls
	slots          []*slot       // Capacity slots for Create and Run, then the self-test's
	boxes          map[string]*sandboxState
	stale          []string // names of dead runtimes whose leftovers are not all gone
	closed         bool
}

// slot is one uid a sandbox can run as.
type slot struct {
	index    int
	uid      int
	lock     *os.File      // holds the uid's reservation
	current  *sandboxState // the sandbox in the slot, nil when free
	broken   string        // why the slot is out of use after an unverified wipe
	selfTest bool          // kept for sandboxes created with Options.SelfTest
}

// NewRuntime validates the machine and cfg and prepares the runtime: it
// needs root, bubblewrap, a cgroup hierarchy with memory, pids and cpu, and
// the seccomp program; it removes what runtimes that ended without closing
// left (their mounts, cgroups and directories: a runtime whose lock is free
// is dead, whatever its age), copies the init binary to a root-owned 0755
// path under StateDir, writes the generated /etc files and reserves one host
// uid per slot, plus one for the self-test's slot. Errors say which
// requirement failed.
func NewRuntime(cfg Config) (*Runtime, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if len(cfg.HostProblems) > 0 {
		cfg.Pool, cfg.PoolImages, cfg.PoolBrowser = 0, nil, 0 // nothing can start ahead
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("new runtime: must run as root (sandboxes use per-slot host uids and cgroups)")
	}
	// The scan of /proc for the uids that own processes, which the slots'
	// uids must not be, runs beside the rest of the set-up.
	owners := make(chan ownersScan, 1)
	go func() {
		busy, err := processOwners()
		owners <- ownersScan{busy, err}
	}()
	base, err := cgroup.DetectAt(cgroup.Options{Parent: cfg.CgroupParent})
	if err != nil {
		return nil, fmt.Errorf("new runtime: %w", err)
	}
	// cgroup v1 charges TCP's socket buffers (memory.kmem.tcp) but no
	// other inet socket's: there the filter refuses those.
	prog, err := seccomp.Program(seccomp.Options{TCPOnlyInet: base.Version() == 1})
	if err != nil {
		return nil, fmt.Errorf("new runtime: %w", err)
	}
	r := &Runtime{core: &core{cfg: cfg, base: base, seccomp: prog, prlimit: findPrlimit(prlimitPath), log: cfg.Logger, boxes: map[string]*sandboxState{},
		janitor: make(chan struct{}, 1), janitorDone: make(chan struct{}),
		poolWake: make(chan struct{}, 1), poolStop: make(chan struct{}), poolDone: make(chan struct{}),
		poolChanged: make(chan struct{}), poolStartingOf: map[int]int{}}}
	err = r.prepareDir()
	if n := len(r.boxPath("0123456789abcdef0123") + "/egress.sock"); err == nil && n >= maxSocketPath {
		err = fmt.Errorf("state dir %s is too long for unix socket paths", r.cfg.StateDir)
	}
	if err == nil {
		scan := <-owners
		err = scan.err
		if err == nil {
			err = r.reserveSlots(scan.busy)
		}
	}
	if err != nil {
		r.releaseSlots()
		if r.dir != "" {
			_ = unmountUnder(r.dir)
			_ = removeOwnTree(r.dir)
		}
		if r.etcLock != nil {
			r.etcLock.Close()
		}
		if r.dirLock != nil {
			r.dirLock.Close()
		}
		return nil, fmt.Errorf("new runtime: %w", err)
	}
	go r.runJanitor()
	if cfg.poolSize() > 0 {
		go r.runPool()
		r.wakePool()
	}
	return r, nil
}

func (c *Config) defaults() error {
	if err := checkBrowserPath(c.Browser); err != nil {
		return fmt.Errorf("new runtime: %w", err)
	}
	if c.Capacity == 0 {
		c.Capacity = DefaultCapacity
	}
	if c.Capacity < 0 || c.Capacity > MaxCapacity {
		return fmt.Errorf("new runtime: capacity %d is not in 1..%d", c.Capacity, MaxCapacity)
	}
	if c.Bwrap == "" {
		p, err := exec.LookPath("bwrap")
		if err != nil {
			return fmt.Errorf("new runtime: bubblewrap is not installed (apt-get install bubblewrap): %w", err)
		}
		c.Bwrap = p
	}
	if _, err := os.Stat(c.Bwrap); err != nil {
		return fmt.Errorf("new runtime: bubblewrap: %w", err)
	}
	if c.InitBinary == "" {
		p, err := os.Executable()
		if err != nil {
			return fmt.Errorf("new runtime: find own binary: %w", err)
		}
		c.InitBinary = p
	}
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	if c.UIDBase == 0 {
		c.UIDBase = DefaultUIDBase
	}
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = DefaultMaxOpenFiles
	}
	if c.ControlTimeout == 0 {
		c.ControlTimeout = DefaultControlTimeout
	}
	if c.ControlTimeout < 0 {
		return fmt.Errorf("new runtime: control timeout %v is negative", c.ControlTimeout)
	}
	if c.MaxOpenFiles < 64 || c.MaxOpenFiles > 1<<20 {
		return fmt.Errorf("new runtime: max open files %d is not in 64..%d", c.MaxOpenFiles, 1<<20)
	}
	if c.Pool < 0 || c.Pool > c.Capacity {
		return fmt.Errorf("new runtime: pool %d is not in 0..%d (the capacity)", c.Pool, c.Capacity)
	}
	for _, p := range c.PoolImages {
		if p.N < 0 || p.Acquire == nil {
			return fmt.Errorf("new runtime: the pool of image %s has %d sandboxes or no way to acquire it", p.Ref, p.N)
		}
	}
	if c.PoolBrowser < 0 || c.PoolBrowser > c.Capacity {
		return fmt.Errorf("new runtime: browser pool %d is not in 0..%d (the capacity)", c.PoolBrowser, c.Capacity)
	}
	if c.PoolBrowser > 0 && c.Browser == "" {
		return fmt.Errorf("new runtime: a browser pool of %d needs Config.Browser (Chromium's binary); give it or a browser pool of 0", c.PoolBrowser)
	}
	if n := c.poolSize(); n > c.Capacity {
		return fmt.Errorf("new runtime: the pools hold %d sandboxes (%d + %d browser + %d of images), more than the capacity (%d)",
			n, c.Pool, c.PoolBrowser, n-c.Pool-c.PoolBrowser, c.Capacity)
	}
	if c.MaxPtys == 0 {
		c.MaxPtys = DefaultMaxPtys
	}
	if c.MaxPtys < 1 || c.MaxPtys > 1024 {
		return fmt.Errorf("new runtime: max ptys %d is not in 1..1024", c.MaxPtys)
	}
	if c.UIDBase < 1000 {
		return fmt.Errorf("new runtime: uid base %d is below 1000", c.UIDBase)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Capacity is the number of slots for Create and Run (the self-test's own
// slot is not counted).
func (r *Runtime) Capacity() int { return r.cfg.Capacity }

// SelfTest returns the self-test's view of the runtime: its Create puts
// every sandbox in the self-test's slot (Config.SelfTestSlot) as
// Options.SelfTest does, and only this view finds those sandboxes by id
// (Exec, Delete, HostPids, Browser…) or lists them. Its Capacity, Active,
// Broken and Close are the runtime's.
func (r *Runtime) SelfTest() *Runtime { return &Runtime{core: r.core, selfTest: true} }

// sees reports whether sandbox b belongs to this view (see SelfTest).
func (r *Runtime) sees(b *sandboxState) bool { return b.opts.SelfTest == r.selfTest }

// Active is the number of slots for Create and Run in use: running
// sandboxes, sandboxes being wiped, and slots kept out of use by an
// unverified wipe (see Broken). The self-test's sandboxes are not counted,
// whichever slot they are in.
func (r *Runtime) Active() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.slots {
		if s.current != nil && !s.selfTest && !s.current.pooled && !s.current.opts.SelfTest {
			n++
		}
	}
	return n
}

// Pooled is the number of sandboxes started ahead and ready to hand out.
func (r *Runtime) Pooled() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pool)
}

// List describes the running sandboxes of this view (see SelfTest),
// oldest first.
func (r *Runtime) List() []Info {
	r.mu.Lock()
	out := make([]Info, 0, len(r.boxes))
	for _, b := range r.boxes {
		if r.sees(b) {
			in := b.info
			in.Broken = b.brokenErr() != nil
			out = append(out, in)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Info) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}

// Broken lists the slots (the self-test's included) kept out of use because
// their wipe could not be verified, with why; empty when every slot is
// usable. The runtime keeps retrying those wipes and puts a slot back in
// use once nothing of its sandbox is left.
func (r *Runtime) Broken() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.slots {
		if s.broken != "" {
			name := fmt.Sprintf("slot %d", s.index)
			if s.selfTest {
				name = "the self-test's slot"
			}
			out = append(out, fmt.Sprintf("%s (uid %d) is out of use: its wipe could not be verified (%s)", name, s.uid, s.broken))
		}
	}
	return out
}

// ImageProblems says what image sandboxes cannot do on this host (an init
// that is not static, a kernel without idmapped mounts); empty when they can
// do everything.
func (r *Runtime) ImageProblems() []string {
	var out []string
	if !r.initStatic {
		out = append(out, fmt.Sprintf("the init binary %s is not statically linked: image sandboxes cannot start (use codes-sandbox-init as the packages ship it)", r.cfg.InitBinary))
	}
	if p := r.idmaps.problem(); p != "" {
		out = append(out, p)
	}
	return out
}

// LimitProblems says why the runtime cannot enforce every limit of its
// sandboxes (a cgroup controller not delegated to it), with the fix; empty
// when it can. While it cannot, Create refuses every sandbox but the
// self-test's (which then proves the limits do not hold).
func (r *Runtime) LimitProblems() []string { return r.base.Problems() }

// CgroupParents are the cgroup directories every runtime's sandboxes live
// under, one per hierarchy: a sandbox's cgroup is PARENT/<runtime>/<id>.
func (r *Runtime) CgroupParents() []string { return r.base.ParentDirs() }

// HostPids returns the host pids of a sandbox's processes (from its cgroup:
// the bubblewrap monitor, the init and everything they started). Errors:
// ErrNotFound, or the cgroup cannot be read.
func (r *Runtime) HostPids(id string) ([]int, error) {
	b, err := r.get(id)
	if err != nil {
		return nil, err
	}
	pids, err := b.group.Pids()
	if err != nil {
		return nil, fmt.Errorf("host pids: %w", err)
	}
	return pids, nil
}

// get returns sandbox id of this view (see SelfTest); ErrNotFound for
// another view's.
func (r *Runtime) get(id string) (*sandboxState, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.boxes[id]
	if !ok || !r.sees(b) {
		return nil, ErrNotFound
	}
	return b, nil
}

// Close wipes every sandbox and releases the runtime's uids and files. It
// first waits for the wipes already under way and for sandboxes still
// starting (their Create fails and wipes them) or running a Run, so that no
// uid is released before its sandbox is wiped. The error joins the wipes that
// could not be verified.
func (r *Runtime) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	ids := make([]string, 0, len(r.boxes))
	for id := range r.boxes {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	var errs []error
	for _, id := range ids { // both views' sandboxes
		if b, ok := r.takeBox(id); ok {
			if rep := r.wipe(b, "deleted"); !rep.Verified {
				errs = append(errs, fmt.Errorf("close: wipe of %s not verified: %v", id, rep.Leftovers))
			}
		}
	}
	errs = append(errs, r.drainPool()...)
	errs = append(errs, r.awaitWipes()...)
	close(r.janitor)
	<-r.janitorDone
	r.releaseSlots()
	if len(errs) == 0 {
		// What is left of a wipe that failed stays for the next runtime,
		// which finds this one dead (its lock free) and removes it.
		if err := r.removeOwnCgroups(); err != nil {
			errs = append(errs, fmt.Errorf("close: %w", err))
		}
		if err := unmountViews(r.dir); err != nil {
			errs = append(errs, fmt.Errorf("close: %w", err))
		} else if err := removeOwnTree(r.dir); err != nil {
			errs = append(errs, fmt.Errorf("close: %w", err))
		}
	}
	r.idmaps.close()
	r.etcLock.Close()
	if err := removeUnusedEtc(r.cfg.StateDir, r.name, r.etcDir); err != nil {
		r.log.Warn("cannot remove the /etc copies no runtime uses; the next runtime tries again", "err", err)
	}
	if len(errs) == 0 {
		// Nothing of this runtime is left for the next one to find by its
		// lock. Removed while still held: one that opened it meanwhile
		// finds a dead runtime with nothing left.
		_ = os.Remove(filepath.Join(runtimeLockDir, r.name+".lock"))
	}
	r.dirLock.Close()
	return errors.Join(errs...)
}

// removeOwnCgroups removes the runtime's cgroup directory, which is empty
// once every sandbox is wiped: one rmdir per hierarchy, and the whole
// RemoveTree only when one is not.
func (r *Runtime) removeOwnCgroups() error {
	for _, d := range r.cg.ParentDirs() {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			ctx, cancel := context.WithTimeout(context.Background(), wipeTimeout)
			defer cancel()
			return r.base.RemoveTree(ctx, r.name)
		}
	}
	return nil
}

// boxPath is the host path of a sandbox's directory (see boxdir.go).
func (r *Runtime) boxPath(id string) string { return filepath.Join(r.dir, id) }

// awaitWipes waits until the sandbox of every claimed slot is wiped (one
// still starting, one a Delete or its time box is wiping, a Run's) and
// returns the wipes among them that could not be verified. Slots already
// out of use before it was called are not waited for nor reported again.
func (r *Runtime) awaitWipes() []error {
	r.mu.Lock()
	var pending []*sandboxState
	for _, s := range r.slots {
		if s.current != nil && s.broken == "" {
			pending = append(pending, s.current)
		}
	}
	r.mu.Unlock()
	var errs []error
	for _, b := range pending {
		<-b.wiped
		r.mu.Lock()
		broken := b.slot.broken
		r.mu.Unlock()
		if broken != "" {
			errs = append(errs, fmt.Errorf("close: wipe of %s not verified: %s", b.id, broken))
		}
	}
	return errs
}

package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/egress/policy"
	"openvibe.network/agentsandbox/internal/buildinfo"
	"openvibe.network/agentsandbox/internal/jsonlog"
	"openvibe.network/agentsandbox/internal/metrics"
	"openvibe.network/agentsandbox/internal/runcmd"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/sandbox/hostcheck"
	"openvibe.network/agentsandbox/worker"
)

// stackFlags are the flags of the sandbox stack shared by selftest, checkin
// and serve.
type stackFlags struct {
	stateDir       string
	noEgress       bool
	maxOpenFiles   int
	maxPtys        int
	pool           int
	egressResolver string
	egressDeny     listFlag
	maxPolicy      int
	limits         runcmd.LimitFlags
	cgroupParent   string
	browser        string
}

func (s *stackFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.stateDir, "state-dir", "", "directory for the runtime's files (default "+sandbox.DefaultStateDir+")")
	fs.BoolVar(&s.noEgress, "no-egress", false,
		"run without the egress proxy: sandboxes get no way out, egress_refuses_private cannot be proved and Live will refuse the report")
	fs.IntVar(&s.maxOpenFiles, "max-open-files", sandbox.DefaultMaxOpenFiles, "descriptor limit of every sandbox process (64..1048576)")
	fs.IntVar(&s.maxPtys, "max-ptys", sandbox.DefaultMaxPtys, "pseudo-terminals one sandbox may hold (1..1024)")
	fs.IntVar(&s.pool, "pool", -1, "sandboxes to keep started ahead in free slots, so a create answers at once (0..capacity; default: the capacity)")
	s.limits.Register(fs, "every sandbox's default, and the most one may ask for")
	fs.StringVar(&s.cgroupParent, "cgroup-parent", "",
		"cgroup below each cgroup mount for the sandboxes' groups (default: on cgroup v2 under systemd, below the service's own delegated cgroup; else codes-sandbox)")
	fs.StringVar(&s.egressResolver, "egress-resolver", "",
		"`IP:PORT` of the DNS server the egress guard asks (e.g. a public recursive resolver; default: the system's)")
	fs.Var(&s.egressDeny, "egress-deny", "`PATTERN` every sandbox is refused, whatever its policy (repeatable; see docs/egress.md)")
	fs.IntVar(&s.maxPolicy, "egress-max-policy", 0, fmt.Sprintf("most allow and deny entries one sandbox's egress policy may hold (default %d)", policy.DefaultMaxEntries))
	fs.StringVar(&s.browser, "browser", "",
		"headless browser sandboxes: auto (when Chromium is installed; the default), on (fail without it) or off; the self-test proves it (see docs/browser.md)")
}

// browserPath resolves --browser: the Chromium binary, or "" for none.
func browserPath(mode string) (string, error) {
	switch mode {
	case "off":
		return "", nil
	case "auto":
		return sandbox.FindBrowser(), nil
	case "on":
		if p := sandbox.FindBrowser(); p != "" {
			return p, nil
		}
		return "", errors.New("--browser on: Chromium is not installed (apt-get install chromium), or give --browser auto or off")
	}
	return "", fmt.Errorf("--browser is %q; give auto, on or off", mode)
}

// stackConfig is what newStack needs.
type stackConfig struct {
	capacity     int
	stateDir     string
	egress       bool
	maxOpenFiles int
	maxPtys      int
	pool         int // -1: the capacity
	limits       agentsandbox.Limits
	cgroupParent string
	// browser is the Chromium binary of browser sandboxes ("" for none).
	browser string
	// secrets are values of the worker's (tokens) the self-test must never
	// find inside a sandbox, beside the canary of its environment.
	secrets []string
	// egressResolver, egressDeny and maxPolicy configure the guard (see
	// the flags); liveURLs are the Live URLs whose addresses the guard
	// refuses as the host's, listeners the worker's own listening addresses
	// it refuses as the proxy's.
	egressResolver string
	egressDeny     []string
	maxPolicy      int
	liveURLs       []string
	listeners      []netip.Prefix
	// metrics, when set, gets the proxy's families and the runtime's wipes.
	metrics *metrics.Registry
	onWipe  func(reason string, rep sandbox.WipeReport)
}

// config checks the flags and returns the stack's config for capacity
// slots; errors name the flag out of range.
func (s *stackFlags) config(fc fileConfig, capacity int) (stackConfig, error) {
	limits, err := s.limits.Limits()
	if err != nil {
		return stackConfig{}, err
	}
	browser, err := browserPath(cmp.Or(s.browser, fc.Browser, "auto"))
	if err != nil {
		return stackConfig{}, err
	}
	if s.pool > capacity {
		return stackConfig{}, fmt.Errorf("--pool is %d; give 0 to the capacity (%d), or leave it out for the capacity", s.pool, capacity)
	}
	return stackConfig{capacity: capacity, stateDir: cmp.Or(s.stateDir, fc.StateDir), egress: !s.noEgress,
		maxOpenFiles: s.maxOpenFiles, maxPtys: s.maxPtys, pool: s.pool, limits: limits, cgroupParent: s.cgroupParent, browser: browser,
		egressResolver: cmp.Or(s.egressResolver, fc.EgressResolver), egressDeny: append(slices.Clone(fc.EgressDeny), s.egressDeny...),
		maxPolicy: cmp.Or(s.maxPolicy, fc.EgressMaxPolicy)}, nil
}

// stack is the runtime, the egress proxy and the self-test of one worker.
type stack struct {
	rt     *sandbox.Runtime
	proxy  *egress.Proxy
	guard  *egress.Guard
	host   *egress.HostAddrs
	tester *worker.SelfTester
	bwrap  string
	log    *slog.Logger
	// limits are every sandbox's default and the most one may ask for.
	limits agentsandbox.Limits
}

// Descriptors the worker keeps per sandbox slot (the self-test's included):
// the proxy's limit on one sandbox's connections, each with an upstream,
// plus the sandbox's listener, control socket and pipes; and for itself
// (API clients, Live, logs).
const (
	descriptorsPerSlot  = 2*egress.DefaultMaxConns + 16
	descriptorsReserved = 1024
)

// checkDescriptorBudget fails when this process may not open enough files
// for capacity sandboxes at their worst plus its own reserve: then one
// sandbox's flood could starve the API or another sandbox.
func checkDescriptorBudget(capacity int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("read the descriptor limit: %w", err)
	}
	need := uint64((capacity+1)*descriptorsPerSlot + descriptorsReserved)
	if lim.Max < need {
		return fmt.Errorf("this process may open %d files, and %d sandbox slots need %d at worst: raise the limit (LimitNOFILE= in the unit, ulimit -n) or lower --capacity",
			lim.Max, capacity, need)
	}
	return nil
}

// poolSize is the pool a flag asks for: -1 means the capacity.
func poolSize(flag, capacity int) int {
	if flag < 0 {
		return capacity
	}
	return flag
}

// newStack starts the egress proxy (unless disabled) and the runtime.
func newStack(cfg stackConfig, log *slog.Logger) (*stack, error) {
	if err := checkDescriptorBudget(cfg.capacity); err != nil {
		return nil, err
	}
	for _, p := range (hostcheck.Host{Root: "/"}).Problems() {
		log.Error("this host cannot run sandboxes as it is", "problem", p)
	}
	guard, host, err := newGuard(cfg, log.With("component", "egress"))
	if err != nil {
		return nil, err
	}
	st := &stack{log: log, limits: cfg.limits, guard: guard, host: host}
	var attacher sandbox.EgressAttacher
	if cfg.egress {
		p, err := egress.NewProxy(egress.ProxyConfig{Guard: st.guard, Logger: log.With("component", "egress"),
			Metrics: cfg.metrics, MaxPolicyEntries: cfg.maxPolicy})
		if err != nil {
			st.close()
			return nil, fmt.Errorf("start egress proxy: %w", err)
		}
		st.proxy, attacher = p, p
	}
	stateDir := cmp.Or(cfg.stateDir, sandbox.DefaultStateDir)
	rt, err := sandbox.NewRuntime(sandbox.Config{
		Capacity: cfg.capacity, StateDir: stateDir, Egress: attacher, Logger: log.With("component", "sandbox"),
		InitBinary: initBinary(log.With("component", "sandbox")), MaxOpenFiles: cfg.maxOpenFiles, MaxPtys: cfg.maxPtys,
		SelfTestSlot: true, Pool: poolSize(cfg.pool, cfg.capacity), PoolEgress: cfg.egress, OnWipe: cfg.onWipe,
		CgroupParent: cfg.cgroupParent, Browser: cfg.browser,
	})
	if err != nil {
		st.close()
		return nil, err
	}
	st.rt = rt
	st.bwrap = bwrapVersion()
	var browsers worker.Browsers
	if cfg.browser != "" {
		browsers = rt
		log.Info("browser sandboxes on", "chromium", cfg.browser)
	}
	canaries := []string{stateDir}
	if home, err := os.UserHomeDir(); err == nil && writable(home) {
		canaries = append(canaries, home)
	}
	st.tester = worker.NewSelfTester(worker.Deps{
		Sandboxes: rt, Guard: st.guard, Inspect: worker.GlobInspector(stateDir, rt.CgroupParents()),
		CanaryDirs: canaries, Egress: cfg.egress, Logger: log.With("component", "selftest"),
		Secrets: append([]string{os.Getenv(canaryEnv)}, cfg.secrets...), MaxOpenFiles: cfg.maxOpenFiles,
		LimitProblems: rt.LimitProblems, Browser: browsers,
	})
	for _, p := range rt.LimitProblems() {
		log.Error("sandbox limits cannot be enforced; no sandbox will start until this is fixed", "problem", p)
	}
	return st, nil
}

// newGuard makes the egress guard of cfg: its resolver, the operator's deny
// list, the proxy's listeners and the host's own addresses (every
// interface, followed through netlink, and the Live URLs').
func newGuard(cfg stackConfig, log *slog.Logger) (*egress.Guard, *egress.HostAddrs, error) {
	resolver, err := egressResolver(cfg.egressResolver)
	if err != nil {
		return nil, nil, err
	}
	deny, err := policy.ParseRules("egress-deny", cfg.egressDeny, policy.Limits{})
	if err != nil {
		return nil, nil, fmt.Errorf("--egress-deny: %w", err)
	}
	live := newLiveAddrs(cfg.liveURLs, net.DefaultResolver, log)
	host, err := egress.NewHostAddrs(egress.HostAddrsConfig{Netlink: true, Extra: live.prefixes, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return egress.NewGuard(egress.GuardConfig{Resolver: resolver, Deny: deny, Self: cfg.listeners, Host: host}), host, nil
}

// writable reports whether the self-test can put a canary in dir (a home
// hidden by systemd's ProtectHome= is not).
func writable(dir string) bool {
	d, err := os.MkdirTemp(dir, ".codes-sandbox-probe-")
	if err != nil {
		return false
	}
	return os.Remove(d) == nil
}

// close wipes every sandbox and stops the proxy; it logs what it could not do.
func (st *stack) close() {
	if st.rt != nil {
		if err := st.rt.Close(); err != nil {
			st.log.Error("close runtime", "err", err)
		}
	}
	if st.proxy != nil {
		if err := st.proxy.Close(); err != nil {
			st.log.Error("close egress proxy", "err", err)
		}
	}
	_ = st.host.Close()
}

// slots is the runtime's state for the report.
func (st *stack) slots() worker.Slots {
	return worker.Slots{Capacity: st.rt.Capacity(), Active: st.rt.Active(), Broken: st.rt.Broken()}
}

// self is what the worker says of itself in its reports.
func (st *stack) self(workerID string) worker.Self {
	return worker.Self{WorkerID: workerID, Version: buildinfo.Read().Version, Bubblewrap: st.bwrap, Limits: st.limits}
}

// bwrapVersion returns the version `bwrap --version` prints, "" if unknown.
func bwrapVersion() string {
	out, err := exec.Command("bwrap", "--version").Output()
	if err != nil {
		return ""
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

func newLogger(w io.Writer) *slog.Logger { return slog.New(jsonlog.NewHandler(w, nil)) }

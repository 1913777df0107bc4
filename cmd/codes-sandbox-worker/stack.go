package main

import (
	"cmp"
	"context"
	"crypto/x509"
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/egress/policy"
	"openvibe.network/agentsandbox/image"
	"openvibe.network/agentsandbox/internal/buildinfo"
	"openvibe.network/agentsandbox/internal/jsonlog"
	"openvibe.network/agentsandbox/internal/metrics"
	"openvibe.network/agentsandbox/internal/runcmd"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/sandbox/hostcheck"
	"openvibe.network/agentsandbox/sandbox/hostprep"
	"openvibe.network/agentsandbox/worker"
)

// stackFlags are the flags of the sandbox stack shared by selftest, checkin
// and serve.
type stackFlags struct {
	stateDir       string
	noEgress       bool
	maxOpenFiles   int
	maxPtys        int
	controlTimeout time.Duration
	pool           optionalInt
	poolBrowser    int
	egressResolver string
	egressDeny     listFlag
	egressHost     listFlag
	upstreamCAFile string
	maxPolicy      int
	limits         runcmd.LimitFlags
	cgroupParent   string
	browser        string
	images         imageFlags
	overcommit     bool
}

func (s *stackFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.stateDir, "state-dir", "", "directory for the runtime's files (default "+sandbox.DefaultStateDir+")")
	fs.BoolVar(&s.noEgress, "no-egress", false,
		"run without the egress proxy: sandboxes get no way out, egress_refuses_private cannot be proved and Live will refuse the report")
	fs.IntVar(&s.maxOpenFiles, "max-open-files", sandbox.DefaultMaxOpenFiles, "descriptor limit of every sandbox process (64..1048576)")
	fs.IntVar(&s.maxPtys, "max-ptys", sandbox.DefaultMaxPtys, "pseudo-terminals one sandbox may hold (1..1024)")
	fs.DurationVar(&s.controlTimeout, "control-timeout", sandbox.DefaultControlTimeout,
		"how long a call waits on a sandbox's init without a word before it pings it, and how long the ping waits: an init that does not answer marks its sandbox broken (409 sandbox_broken; delete it)")
	fs.Var(&s.pool, "pool", "`N` sandboxes to keep started ahead in free slots, so a create answers at once (0..capacity; default: the capacity)")
	fs.IntVar(&s.poolBrowser, "pool-browser", 0,
		"`N` browser sandboxes to keep started ahead, Chromium running, so a browser create's first CDP command answers at once (0..capacity; with --pool and --pool-image at most the capacity; about 170 MiB each: see docs/browser.md)")
	s.limits.Register(fs, "every sandbox's default, and the most one may ask for")
	fs.BoolVar(&s.overcommit, "overcommit", false,
		"start even when capacity × the per-sandbox caps (files, ptys, pids, memory) exceed what the host has free; only warn")
	fs.StringVar(&s.cgroupParent, "cgroup-parent", "",
		"cgroup below each cgroup mount for the sandboxes' groups (default: on cgroup v2 under systemd, below the service's own delegated cgroup; else codes-sandbox)")
	fs.StringVar(&s.egressResolver, "egress-resolver", "",
		"`IP:PORT` of the DNS server the egress guard asks (e.g. a public recursive resolver; default: the system's)")
	fs.Var(&s.egressDeny, "egress-deny", "`PATTERN` every sandbox is refused, whatever its policy (repeatable; see docs/egress.md)")
	fs.Var(&s.egressHost, "egress-host-address",
		"`ADDR` of this host's own that is on no interface (a cloud's 1:1 NAT public address), refused to every sandbox as the host's (repeatable; cloud-init's instance data is read too)")
	fs.StringVar(&s.upstreamCAFile, "egress-upstream-ca-file", "",
		"`FILE` of PEM CA certificates the egress proxy also trusts for the hosts it intercepts for a sandbox's secrets (an operator's own PKI; the host's trust store always counts)")
	fs.IntVar(&s.maxPolicy, "egress-max-policy", 0, fmt.Sprintf("most allow and deny entries one sandbox's egress policy may hold (default %d)", policy.DefaultMaxEntries))
	s.images.register(fs)
	fs.StringVar(&s.browser, "browser", "",
		"headless browser sandboxes: auto (when Chromium is installed; the default), on (fail without it) or off; the self-test proves it (see docs/browser.md)")
}

// optionalInt is an int flag that may be left out, whose help shows no
// default of its own: its usage says what leaving it out means.
type optionalInt struct {
	n   int
	set bool
}

func (o *optionalInt) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.Itoa(o.n)
}

func (o *optionalInt) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return errors.New("want a whole number")
	}
	o.n, o.set = n, true
	return nil
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
	// controlTimeout is the runtime's Config.ControlTimeout.
	controlTimeout time.Duration
	pool           int // -1: the capacity
	// poolBrowser is the runtime's Config.PoolBrowser.
	poolBrowser  int
	limits       agentsandbox.Limits
	cgroupParent string
	// overcommit makes a host too small for capacity sandboxes a warning,
	// not a refusal (see checkHostTables).
	overcommit bool
	// tenants: the stack serves tenants' sandboxes (serve), so its capacity
	// is held against the host's tables at start; the one-shot self-test
	// and the check-in loop make only the self-test's probe sandboxes.
	tenants bool
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
	// egressHost are the host's own addresses on no interface
	// (--egress-host-address); instanceData is cloud-init's instance data
	// file, whose public addresses are the host's too ("" for none).
	egressHost   []netip.Prefix
	instanceData string
	liveURLs     []string
	listeners    []netip.Prefix
	// upstreamRoots verify the hosts the credential broker intercepts
	// (nil: the host's trust store).
	upstreamRoots *x509.CertPool
	// images configures the image store (images are off without a
	// registry).
	images imageConfig
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
	pool := -1
	if s.pool.set {
		if s.pool.n < 0 || s.pool.n > capacity {
			return stackConfig{}, fmt.Errorf("--pool is %d; give 0 to the capacity (%d), or leave it out for the capacity", s.pool.n, capacity)
		}
		pool = s.pool.n
	}
	images, err := s.images.config(fc)
	if err != nil {
		return stackConfig{}, err
	}
	if s.poolBrowser < 0 || s.poolBrowser > capacity {
		return stackConfig{}, fmt.Errorf("--pool-browser is %d; give 0 to the capacity (%d)", s.poolBrowser, capacity)
	}
	if n := images.poolTotal(); n > capacity || max(pool, 0)+s.poolBrowser+n > capacity {
		return stackConfig{}, fmt.Errorf("--pool (%d), --pool-browser (%d) and --pool-image (%d) keep more sandboxes than the capacity (%d): lower one of them",
			max(pool, 0), s.poolBrowser, n, capacity)
	}
	if s.poolBrowser > 0 && browser == "" {
		return stackConfig{}, fmt.Errorf("--pool-browser %d needs browser sandboxes: install Chromium and give --browser auto or on, or give --pool-browser 0", s.poolBrowser)
	}
	resolver, resolverFrom := s.egressResolver, "--egress-resolver"
	if resolver == "" && fc.EgressResolver != "" {
		resolver, resolverFrom = fc.EgressResolver, "egress_resolver in the config"
	}
	if _, err := egressResolver(resolver); err != nil {
		return stackConfig{}, fmt.Errorf("%s %w", resolverFrom, err)
	}
	deny := append(slices.Clone(fc.EgressDeny), s.egressDeny...)
	if _, err := policy.ParseRules("--egress-deny", deny, policy.Limits{}); err != nil {
		return stackConfig{}, err // names the entry (the config's come first)
	}
	hostAddrs, err := parseHostAddrs(append(slices.Clone(fc.EgressHostAddresses), s.egressHost...))
	if err != nil {
		return stackConfig{}, err
	}
	var roots *x509.CertPool
	if s.upstreamCAFile != "" {
		pem, err := os.ReadFile(s.upstreamCAFile)
		if err != nil {
			return stackConfig{}, fmt.Errorf("--egress-upstream-ca-file: %w", err)
		}
		if roots, err = egress.UpstreamRoots(pem); err != nil {
			return stackConfig{}, fmt.Errorf("--egress-upstream-ca-file %s: %w", s.upstreamCAFile, err)
		}
	}
	return stackConfig{upstreamRoots: roots, capacity: capacity, images: images, stateDir: cmp.Or(s.stateDir, fc.StateDir), egress: !s.noEgress,
		maxOpenFiles: s.maxOpenFiles, maxPtys: s.maxPtys, controlTimeout: s.controlTimeout, pool: pool, poolBrowser: s.poolBrowser, limits: limits, cgroupParent: s.cgroupParent, browser: browser,
		overcommit: s.overcommit || fc.Overcommit, egressResolver: resolver, egressDeny: deny, maxPolicy: cmp.Or(s.maxPolicy, fc.EgressMaxPolicy),
		egressHost: hostAddrs, instanceData: egress.DefaultInstanceData}, nil
}

// parseHostAddrs parses the --egress-host-address values (the config's
// egress_host_addresses first): addresses, each a one-address prefix.
// Errors name the value and say what to give.
func parseHostAddrs(vals []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range vals {
		a, err := netip.ParseAddr(v)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("--egress-host-address %q: give an IP address without zone, e.g. 203.0.113.7 or 2001:db8::7", v)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// stack is the runtime, the egress proxy and the self-test of one worker.
type stack struct {
	rt     *sandbox.Runtime
	proxy  *egress.Proxy
	guard  *egress.Guard
	host   *egress.HostAddrs
	tester *worker.SelfTester
	// images is the image store (nil: images are off).
	images *image.Store
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

// poolSize is the pool a flag asks for: -1 means the capacity, less what
// the other pools (browser, images) keep.
func poolSize(flag, capacity, others int) int {
	if flag < 0 {
		return capacity - others
	}
	return flag
}

// newStack starts the egress proxy (unless disabled) and the runtime.
func newStack(cfg stackConfig, log *slog.Logger) (*stack, error) {
	if err := checkDescriptorBudget(cfg.capacity); err != nil {
		return nil, err
	}
	lowerOwnOOMScore(log)
	problems := readyHost(log)
	guard, host, err := newGuard(cfg, log.With("component", "egress"))
	if err != nil {
		return nil, err
	}
	st := &stack{log: log, limits: cfg.limits, guard: guard, host: host}
	var attacher sandbox.EgressAttacher
	if cfg.egress {
		p, err := egress.NewProxy(egress.ProxyConfig{Guard: st.guard, Logger: log.With("component", "egress"),
			Metrics: cfg.metrics, MaxPolicyEntries: cfg.maxPolicy, UpstreamRoots: cfg.upstreamRoots})
		if err != nil {
			st.close()
			return nil, fmt.Errorf("start egress proxy: %w", err)
		}
		st.proxy, attacher = p, p
	}
	stateDir := cmp.Or(cfg.stateDir, sandbox.DefaultStateDir)
	if st.images, err = openImages(cfg.images, stateDir, cfg, host, cfg.metrics, log.With("component", "images")); err != nil {
		st.close()
		return nil, err
	}
	rtc := sandbox.Config{
		Capacity: cfg.capacity, StateDir: stateDir, Egress: attacher, Logger: log.With("component", "sandbox"),
		InitBinary: initBinary(log.With("component", "sandbox")), MaxOpenFiles: cfg.maxOpenFiles, MaxPtys: cfg.maxPtys,
		ControlTimeout: cfg.controlTimeout, SelfTestSlot: true, Pool: poolSize(cfg.pool, cfg.capacity, cfg.poolBrowser+cfg.images.poolTotal()), PoolBrowser: cfg.poolBrowser, PoolEgress: cfg.egress, OnWipe: cfg.onWipe,
		CgroupParent: cfg.cgroupParent, Browser: cfg.browser, HostProblems: problems,
	}
	if st.images != nil {
		rtc.PoolImages = cfg.images.poolImages(st.images)
	}
	rt, err := sandbox.NewRuntime(rtc)
	if err != nil {
		st.close()
		return nil, err
	}
	st.rt = rt
	if cfg.tenants {
		if err := checkHostTables(hostcheck.Host{Root: "/"}, cfg, rt.InetDatagramsRefused(), log); err != nil {
			st.close()
			return nil, err
		}
	}
	if st.images != nil {
		for _, p := range rt.ImageProblems() {
			log.Error("image sandboxes are limited on this host", "problem", p)
		}
	}
	st.bwrap = bwrapVersion()
	// The self-test works through the runtime's view of its own, whose
	// sandboxes the API never sees nor touches.
	probes := rt.SelfTest()
	var browsers worker.Browsers
	if cfg.browser != "" {
		browsers = probes
		log.Info("browser sandboxes on", "chromium", cfg.browser)
	}
	canaries := []string{stateDir}
	if home, err := os.UserHomeDir(); err == nil && writable(home) {
		canaries = append(canaries, home)
	}
	st.tester = worker.NewSelfTester(worker.Deps{
		Sandboxes: probes, Guard: st.guard, Inspect: worker.GlobInspector(stateDir, rt.CgroupParents()),
		CanaryDirs: canaries, Egress: cfg.egress, Logger: log.With("component", "selftest"),
		Secrets: append([]string{os.Getenv(canaryEnv)}, cfg.secrets...), MaxOpenFiles: cfg.maxOpenFiles,
		LimitProblems: rt.LimitProblems, Browser: browsers, Image: st.selfTestImage(cfg.images),
		InetDatagramsRefused: rt.InetDatagramsRefused(),
		HostProblems:         func() []string { return problems },
	})
	for _, p := range rt.LimitProblems() {
		log.Error("sandbox limits cannot be enforced; no sandbox will start until this is fixed", "problem", p)
	}
	return st, nil
}

// readyHost readies the container the worker may run in (hostprep), logs
// what it did, and returns every reason this host cannot run sandboxes
// (hostprep's, hostcheck's, and the namespaces a sandbox needs refused),
// each logged with its fix.
func readyHost(log *slog.Logger) []string {
	prep := hostprep.Prepare(hostprep.Options{})
	for _, d := range prep.Done {
		log.Info("readied this container for sandboxes", "done", d)
	}
	host := hostcheck.Host{Root: "/"}
	problems := append(host.Problems(), prep.Problems...)
	if bwrap, err := exec.LookPath("bwrap"); err == nil && len(problems) == 0 {
		if err := hostprep.Namespaces(bwrap); err != nil {
			problems = append(problems, host.NamespaceRefusal(err))
		}
	}
	for _, p := range problems {
		log.Error("this host cannot run sandboxes as it is; no sandbox will start until this is fixed", "problem", p)
	}
	return problems
}

// newGuard makes the egress guard of cfg: its resolver, the operator's deny
// list, the proxy's listeners and the host's own addresses (every
// interface, followed through netlink, the Live URLs', the operator's
// --egress-host-address and those cloud-init's instance data names).
func newGuard(cfg stackConfig, log *slog.Logger) (*egress.Guard, *egress.HostAddrs, error) {
	resolver, err := egressResolver(cfg.egressResolver)
	if err != nil {
		return nil, nil, fmt.Errorf("--egress-resolver %w", err)
	}
	deny, err := policy.ParseRules("egress-deny", cfg.egressDeny, policy.Limits{})
	if err != nil {
		return nil, nil, fmt.Errorf("--egress-deny: %w", err)
	}
	live := newLiveAddrs(cfg.liveURLs, net.DefaultResolver, log)
	host, err := egress.NewHostAddrs(egress.HostAddrsConfig{Netlink: true, Extra: live.prefixes, Logger: log,
		Static: cfg.egressHost, InstanceData: cfg.instanceData})
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
	if st.images != nil {
		if err := st.images.Close(); err != nil {
			st.log.Error("close image store", "err", err)
		}
	}
	_ = st.host.Close()
}

// selfTestImage is the self-test's image (nil without one).
func (st *stack) selfTestImage(c imageConfig) func(context.Context) (*sandbox.RootImage, error) {
	if st.images == nil || c.selfTest == "" {
		return nil
	}
	return acquirer(st.images, c.selfTest)
}

// slots is the runtime's state for the report.
func (st *stack) slots() worker.Slots {
	return worker.Slots{Capacity: st.rt.Capacity(), Active: st.rt.Active(), Broken: st.rt.Broken()}
}

// self is what the worker says of itself in its reports.
func (st *stack) self(workerID string) worker.Self {
	return worker.Self{WorkerID: workerID, Version: buildinfo.Read().Version, Bubblewrap: st.bwrap, Limits: st.limits,
		ExecIsolation: sandbox.ExecIsolation(), SocketMemory: st.rt.SocketMemory()}
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

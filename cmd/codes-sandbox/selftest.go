package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"text/tabwriter"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/internal/cli"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/worker"
)

// version is the worker's version in its reports (set with -ldflags -X).
var version = "0.1.0-dev"

// stackFlags are the flags of the sandbox stack shared by selftest, checkin
// and serve.
type stackFlags struct {
	stateDir     string
	noEgress     bool
	maxOpenFiles int
	maxPtys      int
}

func (s *stackFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.stateDir, "state-dir", "", "directory for the runtime's files (default "+sandbox.DefaultStateDir+")")
	fs.BoolVar(&s.noEgress, "no-egress", false,
		"run without the egress proxy: sandboxes get no way out, egress_refuses_private cannot be proved and Live will refuse the report")
	fs.IntVar(&s.maxOpenFiles, "max-open-files", sandbox.DefaultMaxOpenFiles, "descriptor limit of every sandbox process (64..1048576)")
	fs.IntVar(&s.maxPtys, "max-ptys", sandbox.DefaultMaxPtys, "pseudo-terminals one sandbox may hold (1..1024)")
}

// stackConfig is what newStack needs.
type stackConfig struct {
	capacity     int
	stateDir     string
	egress       bool
	maxOpenFiles int
	maxPtys      int
	// secrets are values of the worker's (tokens) the self-test must never
	// find inside a sandbox, beside the canary of its environment.
	secrets []string
}

func (s *stackFlags) config(fc fileConfig, capacity int) stackConfig {
	return stackConfig{capacity: capacity, stateDir: cmp.Or(s.stateDir, fc.StateDir), egress: !s.noEgress,
		maxOpenFiles: s.maxOpenFiles, maxPtys: s.maxPtys}
}

// stack is the runtime, the egress proxy and the self-test of one worker.
type stack struct {
	rt     *sandbox.Runtime
	proxy  *egress.Proxy
	guard  *egress.Guard
	tester *worker.SelfTester
	bwrap  string
	log    *slog.Logger
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

// newStack starts the egress proxy (unless disabled) and the runtime.
func newStack(cfg stackConfig, log *slog.Logger) (*stack, error) {
	if err := checkDescriptorBudget(cfg.capacity); err != nil {
		return nil, err
	}
	st := &stack{log: log, guard: egress.NewGuard(egress.GuardConfig{Resolver: net.DefaultResolver})}
	var attacher sandbox.EgressAttacher
	if cfg.egress {
		p, err := egress.NewProxy(egress.ProxyConfig{Guard: st.guard, Logger: log.With("component", "egress")})
		if err != nil {
			return nil, fmt.Errorf("start egress proxy: %w", err)
		}
		st.proxy, attacher = p, p
	}
	stateDir := cmp.Or(cfg.stateDir, sandbox.DefaultStateDir)
	rt, err := sandbox.NewRuntime(sandbox.Config{
		Capacity: cfg.capacity, StateDir: stateDir, Egress: attacher, Logger: log.With("component", "sandbox"),
		InitBinary: initBinary(log.With("component", "sandbox")), MaxOpenFiles: cfg.maxOpenFiles, MaxPtys: cfg.maxPtys,
	})
	if err != nil {
		st.close()
		return nil, err
	}
	st.rt = rt
	st.bwrap = bwrapVersion()
	canaries := []string{stateDir}
	if home, err := os.UserHomeDir(); err == nil && writable(home) {
		canaries = append(canaries, home)
	}
	st.tester = worker.NewSelfTester(worker.Deps{
		Sandboxes: rt, Guard: st.guard, Inspect: worker.GlobInspector(stateDir, rt.CgroupParents()),
		CanaryDirs: canaries, Egress: cfg.egress, Logger: log.With("component", "selftest"),
		Secrets: append([]string{os.Getenv(canaryEnv)}, cfg.secrets...), MaxOpenFiles: cfg.maxOpenFiles,
	})
	return st, nil
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
}

// slots is the runtime's state for the report.
func (st *stack) slots() worker.Slots {
	return worker.Slots{Capacity: st.rt.Capacity(), Active: st.rt.Active(), Broken: st.rt.Broken()}
}

// self is what the worker says of itself in its reports.
func (st *stack) self(workerID string) worker.Self {
	return worker.Self{WorkerID: workerID, Version: version, Bubblewrap: st.bwrap}
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

func newLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }

// selftestCmd runs the self-test once and prints a table (or JSON with
// --json). Exit 0 only when every check passed.
func selftestCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("selftest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print {checks, reasons, checked_at, passed} as JSON")
	verbose := fs.Bool("v", false, "log the runtime's lines (JSON) on stderr")
	var sf stackFlags
	sf.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: codes-sandbox selftest [--json] [--state-dir DIR] [--no-egress]")
		fmt.Fprintln(stderr, "Proves each isolation fact with probes in one real sandbox (needs root, bubblewrap, cgroups).")
		fmt.Fprintln(stderr, "Exit 0 only when every check passes.")
		fs.PrintDefaults()
	}
	if code, ok := cli.ParseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	logOut := io.Discard
	if *verbose {
		logOut = stderr
	}
	st, err := newStack(sf.config(fileConfig{}, 1), newLogger(logOut))
	if err != nil {
		fmt.Fprintf(stderr, "codes-sandbox selftest: %v\n", err)
		return 1
	}
	res := st.tester.Run(ctx)
	st.close()
	if *asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		printTable(stdout, res)
	}
	if !res.Passed {
		return 1
	}
	return 0
}

func printTable(w io.Writer, res worker.Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT")
	for _, c := range agentsandbox.Checks() {
		r := "FAIL"
		if res.Checks[c] {
			r = "ok"
		}
		fmt.Fprintf(tw, "%s\t%s\n", c, r)
	}
	tw.Flush()
	verdict := "all checks passed"
	if !res.Passed {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "\n%s (%s, in %v)\n", verdict, res.CheckedAt.UTC().Format("2006-01-02T15:04:05Z"), res.Duration.Round(1e6))
	for _, r := range res.Reasons {
		fmt.Fprintf(w, "  - %s\n", r)
	}
}

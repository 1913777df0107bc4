package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/internal/cli"
	"openvibe.network/agentsandbox/internal/memlisten"
	"openvibe.network/agentsandbox/internal/metrics"
	"openvibe.network/agentsandbox/internal/tlsfiles"
	"openvibe.network/agentsandbox/mcpserver"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/worker"
	"openvibe.network/agentsandbox/worker/httpapi"
)

// defaultListen is the API's address unless --listen or the config says.
const defaultListen = "127.0.0.1:8088"

// serveOptions are the flags of `codes-sandbox serve`.
type serveOptions struct {
	listen, addrFile, apiTokenFile string
	tlsCertFile, tlsKeyFile        string
	metricsListen, egressDefault   string
	previewListen, previewBaseURL  string
	capacity, maxUploadMB          int
	selfTestEvery, checkInEvery    time.Duration
	shutdownTimeout                time.Duration
	pprof                          bool
	checkIns                       checkInFlags
	stack                          stackFlags
}

// serveHelp is what serve --help says after its synopsis.
const serveHelp = `Runs the worker: the sandbox runtime, the egress proxy, the self-test (at start, every
--selftest-interval and on demand), the check-in loop to each Live, and the API for Codes.
SIGINT/SIGTERM shut it down gracefully and wipe every sandbox; SIGHUP reloads the TLS
certificate. Logs are JSON on stderr.`

func serveCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	var o serveOptions
	fs := cli.NewFlagSet("codes-sandbox serve", `--api-token-file FILE [--listen ADDR] [--capacity N] [--state-dir DIR]
         [--live-url URL --stream ID --subject PERSON_ID --service-token-file FILE]... [--config FILE]
         [--metrics-listen ADDR] [--egress-default none|public] [--egress-deny PATTERN]... [--egress-resolver IP:PORT]
         [--egress-host-address ADDR]... [--tls-cert-file FILE --tls-key-file FILE] [--preview-listen ADDR [--preview-base-url URL]]`, serveHelp)
	fs.StringVar(&o.listen, "listen", "", "address of the API for OpenVibe.Codes, port 0 picks a free one (default "+defaultListen+")")
	fs.StringVar(&o.addrFile, "addr-file", "", "write the address actually listened on to this file once listening")
	fs.StringVar(&o.apiTokenFile, "api-token-file", "", "file holding the API's bearer token (required)")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", "", "serve the API over HTTPS with this certificate (PEM, chain after the leaf); SIGHUP reloads it")
	fs.StringVar(&o.tlsKeyFile, "tls-key-file", "", "the private key of --tls-cert-file (PEM)")
	fs.IntVar(&o.maxUploadMB, "max-upload-mb", httpapi.DefaultMaxUpload>>20, "largest file or archive upload the API takes, in MB (a larger one is answered 413 before its body is read)")
	fs.IntVar(&o.capacity, "capacity", 0, fmt.Sprintf("sandbox slots, 1..%d (default %d)", sandbox.MaxCapacity, sandbox.DefaultCapacity))
	fs.DurationVar(&o.selfTestEvery, "selftest-interval", worker.DefaultSelfTestInterval, "how often the self-test runs again")
	fs.DurationVar(&o.checkInEvery, "checkin-interval", worker.DefaultCheckInInterval, "how often to check in with Live (±20% jitter)")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long a shutdown waits for API requests in flight")
	fs.StringVar(&o.metricsListen, "metrics-listen", "", "`ADDR` to serve Prometheus metrics on at /metrics, without the API token (default: none; keep it on loopback)")
	fs.StringVar(&o.previewListen, "preview-listen", "", "`ADDR` to serve the sandboxes' preview URLs on (default: none; see --preview-base-url)")
	fs.StringVar(&o.previewBaseURL, "preview-base-url", "", "`URL` browsers reach --preview-listen by, with {port} and {id} in its host name, one origin per sandbox port (default on loopback: http://{port}-{id}.localhost:PORT)")
	fs.BoolVar(&o.pprof, "pprof", false, "serve Go's profiles and execution traces (net/http/pprof) at /debug/pprof/ on --metrics-listen, which must be on loopback (for profiling; see docs/benchmarks.md)")
	fs.StringVar(&o.egressDefault, "egress-default", "", "egress policy of a sandbox created without one: none or public (default public)")
	o.checkIns.register(fs)
	o.stack.register(fs)
	if code, ok := cli.Parse(fs, args, 0, 0, stdout, stderr); !ok {
		return code
	}
	if err := o.check(setFlags(fs)); err != nil {
		fmt.Fprintf(stderr, "codes-sandbox serve: %v\n", err)
		return 2
	}
	log := newLogger(stderr)
	if err := serve(ctx, o, log); err != nil {
		var ce configError
		if errors.As(err, &ce) {
			fmt.Fprintf(stderr, "codes-sandbox serve: %v\n", ce.err)
			return 2
		}
		log.Error("serve failed", "err", err.Error())
		return 1
	}
	return 0
}

// check checks the flags' values that need nothing else; set are the flags
// given.
func (o serveOptions) check(set map[string]bool) error {
	switch {
	case o.maxUploadMB < 1:
		return fmt.Errorf("--max-upload-mb is %d; give at least 1", o.maxUploadMB)
	case set["capacity"] && (o.capacity < 1 || o.capacity > sandbox.MaxCapacity):
		return fmt.Errorf("--capacity is %d; give 1 to %d", o.capacity, sandbox.MaxCapacity)
	case o.selfTestEvery < time.Second:
		return fmt.Errorf("--selftest-interval is %v; give at least 1s", o.selfTestEvery)
	case o.checkInEvery < time.Second:
		return fmt.Errorf("--checkin-interval is %v; give at least 1s", o.checkInEvery)
	case o.shutdownTimeout < 0:
		return fmt.Errorf("--shutdown-timeout is %v; give 0 or more", o.shutdownTimeout)
	}
	return nil
}

// configError is an error in what the operator gave (a flag's value, the
// config file, a file either names): serve prints it as one plain line and
// exits 2, as for a bad flag, instead of logging it.
type configError struct{ err error }

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }

// serveConfig is what serve reads and checks before it starts anything.
type serveConfig struct {
	fc            fileConfig
	token         string
	targets       []worker.Target
	tokens        []string
	cert          *tlsfiles.Certificate
	defaultPolicy agentsandbox.EgressPolicy
	stack         stackConfig
}

// load reads and checks everything serve needs from the flags, the config
// file and the files they name (values first, then files); its errors are
// configErrors.
func (o serveOptions) load() (serveConfig, error) {
	var c serveConfig
	var err error
	if c.fc, err = loadConfig(o.checkIns.configFile); err != nil {
		return c, configError{err}
	}
	if c.defaultPolicy, err = egressDefault(cmp.Or(o.egressDefault, c.fc.EgressDefault)); err != nil {
		return c, configError{err}
	}
	capacity := cmp.Or(o.capacity, c.fc.Capacity, sandbox.DefaultCapacity)
	if capacity < 1 || capacity > sandbox.MaxCapacity {
		return c, configError{fmt.Errorf("capacity in the config is %d; give 1 to %d", capacity, sandbox.MaxCapacity)}
	}
	if c.stack, err = o.stack.config(c.fc, capacity); err != nil {
		return c, configError{err}
	}
	if c.token, err = apiToken(cmp.Or(o.apiTokenFile, c.fc.APITokenFile)); err != nil {
		return c, configError{err}
	}
	c.targets, c.tokens, err = buildTargets(append(c.fc.CheckIns, o.checkIns.targets...), cmp.Or(o.checkIns.caFile, c.fc.LiveCAFile))
	if err != nil {
		return c, configError{err}
	}
	if c.cert, err = loadTLS(cmp.Or(o.tlsCertFile, c.fc.TLSCertFile), cmp.Or(o.tlsKeyFile, c.fc.TLSKeyFile)); err != nil {
		return c, configError{err}
	}
	if err := checkPreview(cmp.Or(o.previewListen, c.fc.PreviewListen), cmp.Or(o.previewBaseURL, c.fc.PreviewBaseURL)); err != nil {
		return c, configError{err}
	}
	return c, nil
}

// serve runs the worker until ctx ends, then shuts it down: the API stops
// taking requests, the loops stop, every sandbox is wiped.
func serve(ctx context.Context, o serveOptions, log *slog.Logger) error {
	c, err := o.load()
	if err != nil {
		return err
	}
	fc, token, targets, tokens, cert, defaultPolicy, stc := c.fc, c.token, c.targets, c.tokens, c.cert, c.defaultPolicy, c.stack
	// Listen first: an address in use is reported at once, not after the
	// self-test.
	ln, err := net.Listen("tcp", cmp.Or(o.listen, fc.Listen, defaultListen))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if cert == nil && !isLoopback(ln.Addr()) {
		log.Warn("the API listens beyond loopback without TLS: its bearer token and every command cross the network in clear; give --tls-cert-file and --tls-key-file",
			"addr", ln.Addr().String())
	}
	mln, err := listenMetrics(cmp.Or(o.metricsListen, fc.MetricsListen), log)
	if err != nil {
		ln.Close()
		return err
	}
	if err := checkPprof(o.pprof, mln); err != nil {
		ln.Close()
		if mln != nil {
			mln.Close()
		}
		return configError{err}
	}
	pln, previewBase, err := listenPreview(cmp.Or(o.previewListen, fc.PreviewListen), cmp.Or(o.previewBaseURL, fc.PreviewBaseURL), log)
	if err != nil {
		ln.Close()
		if mln != nil {
			mln.Close()
		}
		return err
	}
	reg := metrics.NewRegistry()
	wm := newWorkerMetrics(reg)
	stc.secrets = append(tokens, token)
	stc.metrics, stc.onWipe = reg, wm.onWipe
	for _, t := range targets {
		stc.liveURLs = append(stc.liveURLs, t.LiveURL)
	}
	stc.listeners, stc.tenants = listenerPrefixes(ln.Addr()), true
	if mln != nil {
		stc.listeners = append(stc.listeners, listenerPrefixes(mln.Addr())...)
	}
	if pln != nil {
		stc.listeners = append(stc.listeners, listenerPrefixes(pln.Addr())...)
	}
	st, err := newStack(stc, log)
	if err != nil {
		ln.Close()
		if mln != nil {
			mln.Close()
		}
		if pln != nil {
			pln.Close()
		}
		return err
	}
	defer st.close()
	wm.observeStack(st)
	targets = wm.meterTargets(targets)
	var metricsDone <-chan error // nil without a listener: never ready
	if mln != nil {
		var metricsSrv *http.Server
		metricsSrv, metricsDone = serveMetrics(reg, mln, o.pprof, log.With("component", "metrics"))
		defer metricsSrv.Close()
	}
	self := st.self(cmp.Or(o.checkIns.workerID, fc.WorkerID, defaultWorkerID()))
	self.SelfTestMaxAge = 2*o.selfTestEvery + time.Minute

	first := st.tester.Run(ctx)
	log.Log(ctx, levelOf(first.Passed), "self-test at start", "passed", first.Passed, "reasons", first.Reasons,
		"duration_ms", first.Duration.Milliseconds())

	if cert != nil {
		ln = tls.NewListener(ln, cert.Config())
	}
	srv, served, err := startAPI(st, apiConfig{token: token, egressDefault: defaultPolicy, metrics: wm, maxUpload: int64(o.maxUploadMB) << 20,
		preview: pln, previewBase: previewBase}, ln, o.addrFile, log)
	if err != nil {
		return err
	}
	stopReload := reloadOnHangup(cert, log)
	defer stopReload()
	log.Info("ready", "capacity", st.rt.Capacity(), "egress", st.proxy != nil, "egress_default", defaultPolicy.Mode, "images", st.images != nil,
		"check_ins", len(targets), "host_addresses", len(st.host.Prefixes()))

	loops, stopLoops := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { st.tester.Every(loops, o.selfTestEvery, nil) })
	if len(targets) > 0 {
		wg.Go(func() {
			_ = worker.RunCheckIns(loops, worker.CheckInConfig{
				Targets: targets, Interval: o.checkInEvery, Logger: log.With("component", "checkin"),
				Report: func(now time.Time) agentsandbox.WorkerCheckIn {
					return worker.BuildReport(self, st.tester.Last(), st.slots(), now)
				},
			})
		})
	}

	select {
	case <-ctx.Done():
	case err = <-served:
	case err = <-metricsDone:
		err = fmt.Errorf("serve metrics: %w", err)
	}
	log.Info("shutting down")
	stopLoops()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.shutdownTimeout)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		srv.Close()
	}
	wg.Wait()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve api: %w", err)
	}
	return nil
}

// loadTLS loads the API's certificate; nil without files (plain HTTP).
func loadTLS(certFile, keyFile string) (*tlsfiles.Certificate, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("give both --tls-cert-file and --tls-key-file, or neither")
	}
	return tlsfiles.Load(certFile, keyFile)
}

// reloadOnHangup reloads cert on every SIGHUP (and, without one, says there
// is nothing to reload instead of dying) until stop is called.
func reloadOnHangup(cert *tlsfiles.Certificate, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				if cert == nil {
					log.Info("SIGHUP: nothing to reload (the API has no TLS certificate)")
				} else if err := cert.Reload(); err != nil {
					log.Error("SIGHUP: TLS certificate not reloaded; the old one stays", "err", err.Error())
				} else {
					log.Info("SIGHUP: TLS certificate reloaded", "not_after", cert.NotAfter())
				}
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}

// isLoopback reports whether addr is a loopback address.
func isLoopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

func apiToken(file string) (string, error) {
	if file == "" {
		return "", errors.New("--api-token-file is required (the API's bearer token, in a file)")
	}
	token, err := readSecret(file)
	if err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	return token, nil
}

// apiConfig is what the API needs beside the stack.
type apiConfig struct {
	token         string
	egressDefault agentsandbox.EgressPolicy
	metrics       *workerMetrics // nil: creates and execs are not timed
	maxUpload     int64          // bytes; 0: the API's default
	preview       net.Listener   // the previews' listener; nil: none
	previewBase   string         // their base URL (with preview)
}

// startAPI serves the worker API for Codes on ln and writes its address to
// addrFile (when set); served gets the server's end.
func startAPI(st *stack, ac apiConfig, ln net.Listener, addrFile string, log *slog.Logger) (*http.Server, <-chan error, error) {
	var rt httpapi.Runtime = st.rt
	if ac.metrics != nil {
		rt = meteredRuntime{Runtime: st.rt, m: ac.metrics}
	}
	var check func(agentsandbox.EgressPolicy) (agentsandbox.EgressPolicy, error)
	if st.proxy != nil {
		check = st.proxy.CheckPolicy
	}
	// The MCP endpoint's tools call this API through the Go client, over
	// in-memory connections to the same handler: the same token, the same
	// limits, no socket.
	self := memlisten.New()
	mcpSrv, err := mcpserver.New(mcpserver.Config{Logger: log.With("component", "mcp"),
		Worker: client.NewWorker("http://worker.internal", ac.token, &http.Client{Transport: &http.Transport{DialContext: self.DialContext}})})
	if err != nil {
		ln.Close()
		if ac.preview != nil {
			ac.preview.Close()
		}
		return nil, nil, err
	}
	hc := httpapi.Config{
		Runtime: rt, Token: ac.token, Egress: st.proxy != nil, Browser: st.rt.HasBrowser(), Limits: st.limits, Logger: log.With("component", "api"),
		EgressDefault: ac.egressDefault, CheckEgress: check, MaxUpload: ac.maxUpload, Ports: httpapi.PortsConfig{PreviewBaseURL: ac.previewBase},
		Status:      func() httpapi.Status { return status(st) },
		RunSelfTest: func(ctx context.Context) (httpapi.SelfTestSummary, error) { return summary(st.tester.Run(ctx)), nil },
		MCP:         mcpSrv.Handler(),
	}
	if st.images != nil {
		hc.Images = st.images
	}
	api, err := httpapi.New(hc)
	if err != nil {
		ln.Close()
		if ac.preview != nil {
			ac.preview.Close()
		}
		return nil, nil, err
	}
	srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: apiMaxHeaderBytes, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { _ = srv.Serve(self) }()
	go func() {
		err := srv.Serve(ln)
		select {
		case served <- err:
		default:
		}
	}()
	if ac.preview != nil {
		servePreview(api, srv, ac.preview, served, log.With("component", "preview"))
	}
	log.Info("listening", "addr", ln.Addr().String())
	if addrFile != "" {
		if err := writeAtomic(addrFile, ln.Addr().String()+"\n"); err != nil {
			srv.Close()
			return nil, nil, err
		}
	}
	return srv, served, nil
}

// levelOf is the log level of an outcome: warn when it failed.
func levelOf(ok bool) slog.Level {
	if ok {
		return slog.LevelInfo
	}
	return slog.LevelWarn
}

func status(st *stack) httpapi.Status {
	s := httpapi.Status{Capacity: st.rt.Capacity(), Active: st.rt.Active(), Pooled: st.rt.Pooled(), SlotsOutOfUse: st.rt.Broken()}
	if last := st.tester.Last(); last != nil {
		sum := summary(*last)
		s.SelfTest = &sum
	}
	return s
}

func summary(r worker.Result) httpapi.SelfTestSummary {
	return httpapi.SelfTestSummary{Passed: r.Passed, Checks: r.Checks, NotRun: r.NotRun, Reasons: r.Reasons, CheckedAt: r.CheckedAt}
}

// writeAtomic writes data to path through a temporary file and a rename.
func writeAtomic(path, data string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".addr-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

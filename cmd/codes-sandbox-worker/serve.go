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
	"openvibe.network/agentsandbox/internal/cli"
	"openvibe.network/agentsandbox/internal/metrics"
	"openvibe.network/agentsandbox/internal/tlsfiles"
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
	capacity, maxUploadMB          int
	selfTestEvery, checkInEvery    time.Duration
	shutdownTimeout                time.Duration
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
         [--tls-cert-file FILE --tls-key-file FILE]`, serveHelp)
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
	fs.StringVar(&o.egressDefault, "egress-default", "", "egress policy of a sandbox created without one: none or public (default public)")
	o.checkIns.register(fs)
	o.stack.register(fs)
	if code, ok := cli.Parse(fs, args, 0, 0, stdout, stderr); !ok {
		return code
	}
	if o.maxUploadMB < 1 {
		fmt.Fprintf(stderr, "codes-sandbox serve: --max-upload-mb is %d; give at least 1\n", o.maxUploadMB)
		return 2
	}
	if setFlags(fs)["capacity"] && (o.capacity < 1 || o.capacity > sandbox.MaxCapacity) {
		fmt.Fprintf(stderr, "codes-sandbox serve: --capacity is %d; give 1 to %d\n", o.capacity, sandbox.MaxCapacity)
		return 2
	}
	log := newLogger(stderr)
	if err := serve(ctx, o, log); err != nil {
		log.Error("serve failed", "err", err.Error())
		return 1
	}
	return 0
}

// serve runs the worker until ctx ends, then shuts it down: the API stops
// taking requests, the loops stop, every sandbox is wiped.
func serve(ctx context.Context, o serveOptions, log *slog.Logger) error {
	fc, err := loadConfig(o.checkIns.configFile)
	if err != nil {
		return err
	}
	token, err := apiToken(cmp.Or(o.apiTokenFile, fc.APITokenFile))
	if err != nil {
		return err
	}
	targets, tokens, err := buildTargets(append(fc.CheckIns, o.checkIns.targets...), cmp.Or(o.checkIns.caFile, fc.LiveCAFile))
	if err != nil {
		return err
	}
	cert, err := loadTLS(cmp.Or(o.tlsCertFile, fc.TLSCertFile), cmp.Or(o.tlsKeyFile, fc.TLSKeyFile))
	if err != nil {
		return err
	}
	defaultPolicy, err := egressDefault(cmp.Or(o.egressDefault, fc.EgressDefault))
	if err != nil {
		return err
	}
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
	reg := metrics.NewRegistry()
	wm := newWorkerMetrics(reg)
	capacity := cmp.Or(o.capacity, fc.Capacity, sandbox.DefaultCapacity)
	stc, err := o.stack.config(fc, capacity)
	if err != nil {
		ln.Close()
		if mln != nil {
			mln.Close()
		}
		return err
	}
	stc.secrets = append(tokens, token)
	stc.metrics, stc.onWipe = reg, wm.onWipe
	for _, t := range targets {
		stc.liveURLs = append(stc.liveURLs, t.LiveURL)
	}
	stc.listeners = listenerPrefixes(ln.Addr())
	if mln != nil {
		stc.listeners = append(stc.listeners, listenerPrefixes(mln.Addr())...)
	}
	st, err := newStack(stc, log)
	if err != nil {
		ln.Close()
		if mln != nil {
			mln.Close()
		}
		return err
	}
	defer st.close()
	wm.observeStack(st)
	targets = wm.meterTargets(targets)
	var metricsDone <-chan error // nil without a listener: never ready
	if mln != nil {
		var metricsSrv *http.Server
		metricsSrv, metricsDone = serveMetrics(reg, mln, log.With("component", "metrics"))
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
	srv, served, err := startAPI(st, apiConfig{token: token, egressDefault: defaultPolicy, metrics: wm, maxUpload: int64(o.maxUploadMB) << 20}, ln, o.addrFile, log)
	if err != nil {
		return err
	}
	stopReload := reloadOnHangup(cert, log)
	defer stopReload()
	log.Info("ready", "capacity", st.rt.Capacity(), "egress", st.proxy != nil, "egress_default", defaultPolicy.Mode,
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
	api, err := httpapi.New(httpapi.Config{
		Runtime: rt, Token: ac.token, Egress: st.proxy != nil, Browser: st.rt.HasBrowser(), Limits: st.limits, Logger: log.With("component", "api"),
		EgressDefault: ac.egressDefault, CheckEgress: check, MaxUpload: ac.maxUpload,
		Status:      func() httpapi.Status { return status(st) },
		RunSelfTest: func(ctx context.Context) (httpapi.SelfTestSummary, error) { return summary(st.tester.Run(ctx)), nil },
	})
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
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

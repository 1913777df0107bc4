package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/internal/cli"
	"openvibe.network/agentsandbox/worker"
)

// tokenEnv is the environment variable that may hold the service token (for
// check-in targets without a token file). It is removed from this process's
// environment once read.
const tokenEnv = "CODES_SANDBOX_SERVICE_TOKEN"

// targetConfig is one check-in target as flags or the config file give it.
type targetConfig struct {
	LiveURL          string `json:"live_url"`
	Stream           string `json:"stream"`
	Subject          string `json:"subject"`
	ServiceTokenFile string `json:"service_token_file,omitempty"`
}

// checkInFlags collects the repeatable check-in flag group: each --live-url
// starts a target, the flags after it fill it in.
type checkInFlags struct {
	targets    []targetConfig
	caFile     string
	configFile string
	workerID   string
}

// groupFlag sets one field of the current target.
type groupFlag struct {
	f     *checkInFlags
	field func(*targetConfig) *string
	start bool
}

func (g groupFlag) String() string { return "" }

func (g groupFlag) Set(v string) error {
	if g.start || len(g.f.targets) == 0 {
		if !g.start {
			return errors.New("give --live-url first: it starts a check-in target")
		}
		g.f.targets = append(g.f.targets, targetConfig{})
	}
	p := g.field(&g.f.targets[len(g.f.targets)-1])
	if *p != "" {
		return errors.New("given twice for one target (start another with --live-url)")
	}
	*p = v
	return nil
}

func (c *checkInFlags) register(fs *flag.FlagSet) {
	fs.Var(groupFlag{c, func(t *targetConfig) *string { return &t.LiveURL }, true}, "live-url",
		"Live base `URL` to check in with (repeatable: each starts a target)")
	fs.Var(groupFlag{c, func(t *targetConfig) *string { return &t.Stream }, false}, "stream", "agent stream `ID` of the current target")
	fs.Var(groupFlag{c, func(t *targetConfig) *string { return &t.Subject }, false}, "subject",
		"`PERSON_ID` (the stream's owner) of the current target, sent as X-OV-Subject")
	fs.Var(groupFlag{c, func(t *targetConfig) *string { return &t.ServiceTokenFile }, false}, "service-token-file",
		"`FILE` holding the service token of the current target (default: $"+tokenEnv+")")
	fs.StringVar(&c.caFile, "live-ca-file", "", "PEM file of the CA(s) to trust for https Live URLs (default: the system's)")
	fs.StringVar(&c.configFile, "config", "", "JSON config file (see deploy/codes-sandbox.example.json); flags add to it")
	fs.StringVar(&c.workerID, "worker-id", "", "the worker's name in its reports (default sbw-HOSTNAME)")
}

// fileConfig is the JSON config file of checkin and serve.
type fileConfig struct {
	WorkerID     string         `json:"worker_id,omitempty"`
	LiveCAFile   string         `json:"live_ca_file,omitempty"`
	CheckIns     []targetConfig `json:"check_ins"`
	Listen       string         `json:"listen,omitempty"`
	APITokenFile string         `json:"api_token_file,omitempty"`
	Capacity     int            `json:"capacity,omitempty"`
	StateDir     string         `json:"state_dir,omitempty"`
	TLSCertFile  string         `json:"tls_cert_file,omitempty"`
	TLSKeyFile   string         `json:"tls_key_file,omitempty"`
	// MetricsListen, EgressDefault, EgressDeny, EgressHostAddresses,
	// EgressResolver and EgressMaxPolicy are the file's --metrics-listen,
	// --egress-default, --egress-deny and --egress-host-address (flags add
	// to them), --egress-resolver and --egress-max-policy.
	MetricsListen       string   `json:"metrics_listen,omitempty"`
	EgressDefault       string   `json:"egress_default,omitempty"`
	EgressDeny          []string `json:"egress_deny,omitempty"`
	EgressHostAddresses []string `json:"egress_host_addresses,omitempty"`
	EgressResolver      string   `json:"egress_resolver,omitempty"`
	EgressMaxPolicy     int      `json:"egress_max_policy,omitempty"`
	// Browser is the file's --browser (auto, on or off).
	Browser string `json:"browser,omitempty"`
	// Overcommit is the file's --overcommit (either one is enough).
	Overcommit bool `json:"overcommit,omitempty"`
	// PreviewListen and PreviewBaseURL are the file's --preview-listen and
	// --preview-base-url.
	PreviewListen  string `json:"preview_listen,omitempty"`
	PreviewBaseURL string `json:"preview_base_url,omitempty"`
	// The image store's flags: --image-registry and
	// --image-registry-insecure (flags add to them), --image-auth-file,
	// --image-dir,
	// --image-cache-mb, --pool-image (REF=N; flags add to them) and
	// --selftest-image.
	ImageRegistries         []string `json:"image_registries,omitempty"`
	ImageRegistriesInsecure []string `json:"image_registries_insecure,omitempty"`
	ImageAuthFile           string   `json:"image_auth_file,omitempty"`
	ImageDir                string   `json:"image_dir,omitempty"`
	ImageCacheMB            int      `json:"image_cache_mb,omitempty"`
	PoolImages              []string `json:"pool_images,omitempty"`
	SelfTestImage           string   `json:"selftest_image,omitempty"`
}

func loadConfig(path string) (fileConfig, error) {
	var fc fileConfig
	if path == "" {
		return fc, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fc, fmt.Errorf("read config: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return fc, fmt.Errorf("read config %s: %w", path, err)
	}
	return fc, nil
}

// readSecret reads a token file: one line, surrounding space trimmed.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" || strings.ContainsAny(s, " \n\r\t") {
		return "", fmt.Errorf("read token file %s: want exactly one token", path)
	}
	return s, nil
}

// buildTargets turns the configured targets into check-in targets, reading
// each token from its file or from $CODES_SANDBOX_SERVICE_TOKEN (which is
// then removed from the environment). tokens are the tokens read, for the
// self-test to look for in its sandbox.
func buildTargets(cfgs []targetConfig, caFile string) (targets []worker.Target, tokens []string, err error) {
	envToken := os.Getenv(tokenEnv)
	os.Unsetenv(tokenEnv)
	hc, err := liveHTTPClient(caFile)
	if err != nil {
		return nil, nil, err
	}
	var out []worker.Target
	for i, tc := range cfgs {
		if tc.LiveURL == "" || tc.Stream == "" || tc.Subject == "" {
			return nil, nil, fmt.Errorf("check-in target %d: --live-url, --stream and --subject are all required", i+1)
		}
		token := envToken
		if tc.ServiceTokenFile != "" {
			if token, err = readSecret(tc.ServiceTokenFile); err != nil {
				return nil, nil, err
			}
		}
		if token == "" {
			return nil, nil, fmt.Errorf("check-in target %d: no service token (--service-token-file or $%s)", i+1, tokenEnv)
		}
		lc, err := client.NewLive(tc.LiveURL, token, hc)
		if err != nil {
			return nil, nil, fmt.Errorf("check-in target %d: %w", i+1, err)
		}
		out = append(out, worker.Target{LiveURL: tc.LiveURL, Stream: tc.Stream, Subject: tc.Subject, Live: lc})
		tokens = append(tokens, token)
	}
	return out, tokens, nil
}

// liveHTTPClient returns the client for Live: no proxy from the environment,
// TLS 1.2 or later, trusting only caFile's CAs when given.
func liveHTTPClient(caFile string) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("read live ca file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("read live ca file %s: no PEM certificate in it", caFile)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, nil
}

func defaultWorkerID() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "host"
	}
	id := "sbw-" + h
	if len(id) > 64 {
		id = id[:64]
	}
	return id
}

// checkinCmd runs a self-test and checks in once with every target,
// printing each of Live's answers as JSON. Exit 0 only when every target
// registered the worker.
func checkinCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("codes-sandbox checkin", "--once --live-url URL --stream ID --subject PERSON_ID [--service-token-file FILE] [flags]",
		"Runs the self-test, builds the report and checks in once with each target; prints Live's answers.")
	var cf checkInFlags
	cf.register(fs)
	once := fs.Bool("once", false, "check in once and print Live's answer (required; the loop runs in serve)")
	var sf stackFlags
	sf.register(fs)
	if code, ok := cli.Parse(fs, args, 0, 0, stdout, stderr); !ok {
		return code
	}
	if !*once {
		return cli.UsageError(fs, stderr, "--once is required (the check-in loop runs in serve)")
	}
	fc, err := loadConfig(cf.configFile)
	if err != nil {
		fmt.Fprintf(stderr, "codes-sandbox checkin: %v\n", err)
		return 2
	}
	targets, tokens, err := buildTargets(append(fc.CheckIns, cf.targets...), cmp.Or(cf.caFile, fc.LiveCAFile))
	if err == nil && len(targets) == 0 {
		err = errors.New("no check-in target: give --live-url, --stream, --subject")
	}
	if err != nil {
		fmt.Fprintf(stderr, "codes-sandbox checkin: %v\n", err)
		return 2
	}
	log := newLogger(stderr)
	sf.pool, sf.poolBrowser = optionalInt{n: 0, set: true}, 0 // one self-test: nothing to start ahead
	stc, err := sf.config(fc, 1)
	if err != nil {
		fmt.Fprintf(stderr, "codes-sandbox checkin: %v\n", err)
		return 2
	}
	stc.secrets = tokens
	for _, t := range targets {
		stc.liveURLs = append(stc.liveURLs, t.LiveURL)
	}
	st, err := newStack(stc, log)
	if err != nil {
		fmt.Fprintf(stderr, "codes-sandbox checkin: %v\n", err)
		return 1
	}
	defer st.close()
	res := st.tester.Run(ctx)
	self := st.self(cmp.Or(cf.workerID, fc.WorkerID, defaultWorkerID()))
	code := 0
	for _, t := range targets {
		a, err := worker.CheckIn(ctx, t, worker.BuildReport(self, &res, st.slots(), time.Now()), log)
		out := map[string]any{"live": t.LiveURL, "stream": t.Stream}
		if err != nil {
			out["error"] = err.Error()
		} else {
			out["status"], out["answer"], out["summary"] = a.Status, a.Body, a.Summary()
		}
		b, _ := json.Marshal(out)
		fmt.Fprintln(stdout, string(b))
		if err != nil || !a.OK() {
			code = 1
		}
	}
	return code
}

package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/internal/cli"
)

// probeHelp is what probe --help says after its synopsis.
const probeHelp = `Asks the running worker's API, on its own loopback, how it is, for a container's probes
(deploy/kubernetes runs it as the DaemonSet's liveness and readiness probes):
  live   the API answers GET /v1/status (exit 0), or not in --timeout (exit 1)
  ready  the last self-test passed: every isolation fact proved (exit 0); else its reasons (exit 1)
The address and token come from --config (listen, api_token_file, tls_cert_file) or the flags.`

// probeCmd is `codes-sandbox probe live|ready`.
func probeCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("codes-sandbox probe", "[--config FILE] [--listen ADDR] [--api-token-file FILE] [--timeout D] live|ready", probeHelp)
	config := fs.String("config", "", "the worker's JSON config file")
	listen := fs.String("listen", "", "the API's address (default: the config's, else "+defaultListen+")")
	tokenFile := fs.String("api-token-file", "", "file holding the API's bearer token (default: the config's)")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	if code, ok := cli.Parse(fs, args, 1, 1, stdout, stderr); !ok {
		return code
	}
	what := fs.Arg(0)
	if what != "live" && what != "ready" {
		fmt.Fprintf(stderr, "codes-sandbox probe: %q: give live or ready\n", what)
		return 2
	}
	fc, err := loadConfig(*config)
	if err != nil {
		fmt.Fprintf(stderr, "codes-sandbox probe: %v\n", err)
		return 2
	}
	token, err := apiToken(cmp.Or(*tokenFile, fc.APITokenFile))
	if err != nil {
		fmt.Fprintf(stderr, "codes-sandbox probe: %v\n", err)
		return 2
	}
	base, httpClient, err := probeTarget(cmp.Or(*listen, fc.Listen, defaultListen), fc.TLSCertFile != "")
	if err != nil {
		fmt.Fprintf(stderr, "codes-sandbox probe: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	st, err := client.NewWorker(base, token, httpClient).Status(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "codes-sandbox probe %s: the worker's API did not answer: %v\n", what, err)
		return 1
	}
	if what == "live" {
		fmt.Fprintln(stdout, "live: the API answers")
		return 0
	}
	switch {
	case st.SelfTest == nil:
		fmt.Fprintln(stderr, "not ready: no self-test has run yet")
		return 1
	case !st.SelfTest.Passed:
		fmt.Fprintf(stderr, "not ready: the last self-test failed (%s):\n  - %s\n",
			st.SelfTest.CheckedAt.Format(time.RFC3339), strings.Join(st.SelfTest.Reasons, "\n  - "))
		return 1
	}
	fmt.Fprintf(stdout, "ready: the self-test of %s passed; %d of %d slots in use\n", st.SelfTest.CheckedAt.Format(time.RFC3339), st.Active, st.Capacity)
	return 0
}

// probeTarget is the URL and client that reach the API listening on addr
// from this host's loopback (an unspecified or loopback address; any
// other is refused, so the token never leaves the host). With TLS the
// certificate is not verified: it names the worker's public name, and the
// connection goes to this host's own loopback.
func probeTarget(addr string, useTLS bool) (string, *http.Client, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("listen address %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	switch {
	case host == "" || (ip != nil && ip.IsUnspecified()):
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	case host == "localhost" || (ip != nil && ip.IsLoopback()):
	default:
		return "", nil, fmt.Errorf("the API listens on %s, not on this host's loopback: the probe sends its token to loopback only", addr)
	}
	scheme, c := "http", &http.Client{}
	if useTLS {
		scheme = "https"
		c.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // loopback only, see above
	}
	return scheme + "://" + net.JoinHostPort(host, port), c, nil
}

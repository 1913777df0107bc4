package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/egress/policy"
	"openvibe.network/agentsandbox/internal/cli"
)

// egressCmd dispatches the egress tools.
func egressCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Program{Name: "codes-sandbox egress", Commands: []cli.Command{
		{Name: "check", Summary: "print the egress guard's verdict on HOST:PORT (a name is resolved; nothing is connected to)", Run: func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
			return egressCheck(ctx, args, nil, stdout, stderr)
		}},
	}}.Run(ctx, args, stdin, stdout, stderr)
}

// checkOutput is what egress check prints: the verdict and the policy it
// was decided under.
type checkOutput struct {
	egress.Verdict
	Policy agentsandbox.EgressPolicy `json:"policy"`
}

// egressCheck prints the guard's verdict on HOST:PORT under the policy the
// flags give (--allow: mode allow; else public, less --deny), as JSON,
// without connecting: exit 0 allowed, 1 refused, 2 usage (a target that is
// not HOST:PORT, a URL, a bad flag). With --sni, a
// destination decided by name must also be what a client names: the TLS
// SNI on a tunnel, the Host header on port 80. Names go to resolver once
// (nil: --resolver's, or the system's), and only after the policy let them
// through.
func egressCheck(ctx context.Context, args []string, resolver egress.Resolver, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("codes-sandbox egress check", "[--allow PATTERN]... [--deny PATTERN]... [--sni NAME] [--ports 80,443] [--resolver IP:PORT] HOST:PORT",
		"Prints, as JSON, the egress guard's verdict on HOST:PORT under the policy the flags give, as the proxy would\n"+
			"decide it: a name the policy lets through is resolved, once (with --resolver's server, or the system's),\n"+
			"and every address checked; nothing is ever connected to. Exit 0 allowed, 1 refused, 2 usage.")
	portList := fs.String("ports", "80,443", "allowed destination ports, comma-separated")
	var allow, deny listFlag
	fs.Var(&allow, "allow", "`PATTERN` the sandbox may reach (repeatable; any makes the policy mode allow)")
	fs.Var(&deny, "deny", "`PATTERN` the sandbox may not reach (repeatable)")
	sni := fs.String("sni", "", "the `NAME` a client would send as TLS SNI (on port 80: as Host)")
	resolverAddr := fs.String("resolver", "", "`IP:PORT` of the DNS server to ask for a name (default: the system's)")
	if code, ok := cli.Parse(fs, args, 1, 1, stdout, stderr); !ok {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "codes-sandbox egress check: %v\n", err)
		return 2
	}
	if err := checkTarget(fs.Arg(0)); err != nil {
		return fail(err)
	}
	ports, err := parsePorts(*portList)
	if err != nil {
		return fail(fmt.Errorf("--ports: %w", err))
	}
	configured, err := egressResolver(*resolverAddr)
	if err != nil {
		return fail(fmt.Errorf("--resolver %w", err))
	}
	if resolver == nil { // tests inject theirs
		resolver = configured
	}
	spec := agentsandbox.EgressPolicy{Mode: agentsandbox.EgressPublic, Deny: deny}
	if len(allow) > 0 {
		spec = agentsandbox.EgressPolicy{Mode: agentsandbox.EgressAllow, Allow: agentsandbox.EgressHosts(allow...), Deny: deny}
	}
	pol, err := policy.Compile(spec, policy.Limits{Ports: ports, MaxEntries: math.MaxInt})
	if err != nil {
		return fail(err)
	}
	g := egress.NewGuard(egress.GuardConfig{Ports: ports, Resolver: resolver})
	v := g.CheckPolicy(ctx, fs.Arg(0), pol)
	if v.Allowed && *sni != "" && g.Named(pol) {
		ok, detail := egress.MatchSNI(v.Host, *sni)
		reason := egress.ReasonSNI
		if v.Port == 80 {
			ok, detail = egress.MatchHost(v.Host, v.Port, *sni, true)
			reason = egress.ReasonHostHeader
		}
		if !ok {
			v.Allowed, v.Reason, v.Detail = false, reason, detail
		}
	}
	if v.Addresses == nil {
		v.Addresses = []netip.Addr{}
	}
	out, err := json.Marshal(checkOutput{Verdict: v, Policy: pol.Spec()})
	if err != nil {
		return fail(err)
	}
	fmt.Fprintln(stdout, string(out))
	if !v.Allowed {
		return 1
	}
	return 0
}

// checkTarget checks that target is HOST:PORT with a decimal port from 1
// to 65535: a URL, or a host without its port, is a usage error (not a
// verdict), with an example of what to give.
func checkTarget(target string) error {
	const example = "give HOST:PORT, e.g. pypi.org:443, 93.184.216.34:80 or [2001:db8::1]:443"
	if strings.Contains(target, "/") {
		return fmt.Errorf("%q is a URL or a path, not HOST:PORT; %s", target, example)
	}
	host, port, err := net.SplitHostPort(target)
	if err != nil || host == "" {
		return fmt.Errorf("%q is not HOST:PORT; %s", target, example)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("%q: the port %q is not a number from 1 to 65535; %s", target, port, example)
	}
	return nil
}

// parsePorts parses a comma-separated list of ports; it fails on any item
// that is not a decimal port from 1 to 65535.
func parsePorts(s string) ([]uint16, error) {
	var ports []uint16
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 16)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("bad port %q", f)
		}
		ports = append(ports, uint16(n))
	}
	return ports, nil
}

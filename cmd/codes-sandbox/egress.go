package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/internal/cli"
)

// egressUsage is the synopsis of the egress tools.
const egressUsage = "usage: codes-sandbox egress check [--ports 80,443] HOST:PORT"

// egressCmd dispatches the egress tools.
func egressCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintln(stderr, egressUsage)
		return 0
	}
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, egressUsage)
		return 2
	}
	return egressCheck(ctx, args[1:], net.DefaultResolver, stdout, stderr)
}

// egressCheck prints the guard's verdict on HOST:PORT as JSON, without
// connecting: exit 0 allowed, 1 refused, 2 usage. Names go to resolver once.
func egressCheck(ctx context.Context, args []string, resolver egress.Resolver, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("egress check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	portList := fs.String("ports", "80,443", "allowed destination ports, comma-separated")
	if code, ok := cli.ParseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, egressUsage)
		return 2
	}
	ports, err := parsePorts(*portList)
	if err != nil {
		fmt.Fprintf(stderr, "codes-sandbox egress check: %v\n", err)
		return 2
	}
	g := egress.NewGuard(egress.GuardConfig{Ports: ports, Resolver: resolver})
	v := g.Check(ctx, fs.Arg(0))
	if v.Addresses == nil {
		v.Addresses = []netip.Addr{}
	}
	out, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(stderr, "codes-sandbox egress check: %v\n", err)
		return 2
	}
	fmt.Fprintln(stdout, string(out))
	if !v.Allowed {
		return 1
	}
	return 0
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

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// literalOnly is a resolver for tests: it knows only public.test and fails
// every other name, so no real name is ever looked up.
type literalOnly struct{}

func (literalOnly) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host == "public.test" {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}
	return nil, context.DeadlineExceeded
}

func TestEgressCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		reason string // the verdict's reason; for exit 2, what stderr says
		addrs  []string
	}{
		{"AllowedLiteral", []string{"93.184.216.34:443"}, 0, "ok", []string{"93.184.216.34"}},
		{"AllowedName", []string{"public.test:80"}, 0, "ok", []string{"93.184.216.34"}},
		{"Loopback", []string{"127.0.0.1:80"}, 1, "private-address", []string{"127.0.0.1"}},
		{"Metadata", []string{"169.254.169.254:80"}, 1, "private-address", []string{"169.254.169.254"}},
		{"Port", []string{"93.184.216.34:22"}, 1, "port-not-allowed", []string{}},
		{"PortsFlag", []string{"--ports", "22", "93.184.216.34:22"}, 0, "ok", []string{"93.184.216.34"}},
		{"Numeric", []string{"0x7f.1:80"}, 1, "not-canonical-host", []string{}},
		{"Unresolvable", []string{"nowhere.test:443"}, 1, "resolve-failed", []string{}},
		{"NoArgs", nil, 2, "codes-sandbox egress check: want 1 argument(s), got 0", nil},
		{"TwoArgs", []string{"a:80", "b:80"}, 2, "codes-sandbox egress check: want 1 argument(s), got 2", nil},
		{"BadPortsFlag", []string{"--ports", "x", "a:80"}, 2, `bad port "x"`, nil},
		{"ZeroPort", []string{"--ports", "80,0", "a:80"}, 2, `bad port "0"`, nil},
		// Policies: the name is checked before any lookup (nowhere.test
		// would fail to resolve; denied, it is never asked).
		{"AllowListed", []string{"--allow", "*.test", "public.test:443"}, 0, "ok", []string{"93.184.216.34"}},
		{"AllowUnlisted", []string{"--allow", "pypi.org", "nowhere.test:443"}, 1, "policy-denied", []string{}},
		{"DenyWins", []string{"--allow", "*.test", "--deny", "public.test", "public.test:443"}, 1, "policy-denied", []string{}},
		{"DenyInPublicMode", []string{"--deny", "nowhere.test", "nowhere.test:443"}, 1, "policy-denied", []string{}},
		// An address or range denied refuses the names that resolve to it.
		{"DenyAddressOfName", []string{"--deny", "93.184.216.34", "public.test:443"}, 1, "policy-denied", []string{"93.184.216.34"}},
		{"DenyRangeOfName", []string{"--allow", "public.test", "--deny", "93.184.216.0/24:80", "public.test:80"}, 1, "policy-denied", []string{"93.184.216.34"}},
		{"DenyRangeOtherPort", []string{"--deny", "93.184.216.0/24:80", "public.test:443"}, 0, "ok", []string{"93.184.216.34"}},
		{"AllowLiteralNotListed", []string{"--allow", "public.test", "93.184.216.34:443"}, 1, "policy-denied", []string{}},
		{"SNIMatches", []string{"--allow", "public.test", "--sni", "public.test", "public.test:443"}, 0, "ok", []string{"93.184.216.34"}},
		{"SNIFronted", []string{"--allow", "public.test", "--sni", "other.example", "public.test:443"}, 1, "sni-mismatch", []string{"93.184.216.34"}},
		{"HostFronted", []string{"--allow", "public.test", "--sni", "other.example", "public.test:80"}, 1, "host-mismatch", []string{"93.184.216.34"}},
		{"SNIUncheckedInPublicMode", []string{"--sni", "other.example", "public.test:443"}, 0, "ok", []string{"93.184.216.34"}},
		{"BadPattern", []string{"--allow", "a.*.test", "public.test:443"}, 2, `allow[0]: "a.*.test": a wildcard is only`, nil},
		{"PatternPortNotAllowed", []string{"--allow", "public.test:8080", "public.test:443"}, 2, "port 8080 is not one of", nil},
		{"BadResolver", []string{"--resolver", "dns.example:53", "public.test:443"}, 2, `--resolver "dns.example:53": want an IP address and port`, nil},
		// The target: anything but HOST:PORT is a usage error, not a verdict.
		{"NoPort", []string{"pypi.org"}, 2, `"pypi.org" is not HOST:PORT; give HOST:PORT, e.g. pypi.org:443`, nil},
		{"URL", []string{"https://pypi.org"}, 2, `"https://pypi.org" is a URL or a path, not HOST:PORT`, nil},
		{"URLWithPort", []string{"http://pypi.org:80/simple"}, 2, "is a URL or a path", nil},
		{"PortNotANumber", []string{"pypi.org:https"}, 2, `the port "https" is not a number from 1 to 65535`, nil},
		{"PortTooLarge", []string{"pypi.org:65536"}, 2, `the port "65536" is not a number`, nil},
		{"PortZero", []string{"pypi.org:0"}, 2, `the port "0" is not a number`, nil},
		{"NoHost", []string{":443"}, 2, `":443" is not HOST:PORT`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := egressCheck(context.Background(), tc.args, literalOnly{}, &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d (stdout %q stderr %q)", code, tc.code, out.String(), errb.String())
			}
			if tc.code == 2 {
				if out.Len() != 0 || !strings.Contains(errb.String(), tc.reason) {
					t.Fatalf("stdout %q stderr %q, want nothing and %q", out.String(), errb.String(), tc.reason)
				}
				return
			}
			var got struct {
				Allowed   bool     `json:"allowed"`
				Reason    string   `json:"reason"`
				Addresses []string `json:"addresses"`
			}
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatalf("stdout %q: %v", out.String(), err)
			}
			if got.Allowed != (tc.code == 0) || got.Reason != tc.reason || strings.Join(got.Addresses, ",") != strings.Join(tc.addrs, ",") || got.Addresses == nil {
				t.Fatalf("got %+v, want reason %s addresses %v", got, tc.reason, tc.addrs)
			}
		})
	}
}

func TestEgressCmdUsage(t *testing.T) {
	for _, tc := range []struct {
		name             string
		args             []string
		code             int
		wantOut, wantErr string // substrings; "" means nothing
	}{
		{"Unknown", []string{"nope"}, 2, "", `codes-sandbox egress: unknown command "nope"`},
		{"None", nil, 2, "", "usage: codes-sandbox egress COMMAND"},
		{"Help", []string{"--help"}, 0, "usage: codes-sandbox egress COMMAND", ""},
		{"CheckHelp", []string{"check", "--help"}, 0, "-ports", ""},
		{"CheckHelpSaysNamesAreResolved", []string{"check", "--help"}, 0, "a name the policy lets through is resolved", ""},
		{"ListSaysNamesAreResolved", []string{"--help"}, 0, "a name is resolved; nothing is connected to", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := egressCmd(context.Background(), tc.args, nil, &out, &errb)
			if code != tc.code || (tc.wantOut == "") != (out.Len() == 0) || !strings.Contains(out.String(), tc.wantOut) ||
				(tc.wantErr == "") != (errb.Len() == 0) || !strings.Contains(errb.String(), tc.wantErr) {
				t.Fatalf("exit %d stdout %q stderr %q, want %d, %q and %q", code, out.String(), errb.String(), tc.code, tc.wantOut, tc.wantErr)
			}
		})
	}
}

// TestEgressCheckResolverNamed: a name that does not resolve is refused
// with a detail naming the DNS server --resolver gave, the one really
// asked (a server on this test's loopback that fails every query), not the
// host's.
func TestEgressCheckResolverNamed(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeServerFailure)
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	defer srv.Shutdown()
	asked := pc.LocalAddr().String()
	var out, errb bytes.Buffer
	if code := egressCheck(context.Background(), []string{"--resolver", asked, "nowhere.test:443"}, nil, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1 (stdout %q stderr %q)", code, out.String(), errb.String())
	}
	var got struct{ Reason, Detail string }
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("stdout %q: %v", out.String(), err)
	}
	if got.Reason != "resolve-failed" || !strings.Contains(got.Detail, "on "+asked+":") {
		t.Fatalf("verdict %+v, want resolve-failed naming %s", got, asked)
	}
}

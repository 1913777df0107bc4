package policy

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"openvibe.network/agentsandbox"
)

func allowList(patterns ...string) agentsandbox.EgressPolicy {
	return agentsandbox.EgressPolicy{Mode: agentsandbox.EgressAllow, Allow: agentsandbox.EgressHosts(patterns...)}
}

// TestCompile: what a policy compiles to (its canonical spec), or the
// error a person gets, whole.
func TestCompile(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   agentsandbox.EgressPolicy
		want agentsandbox.EgressPolicy
		err  *Error
	}{
		{"OKNone", agentsandbox.EgressPolicy{Mode: "none"}, agentsandbox.EgressPolicy{Mode: "none"}, nil},
		{"OKPublic", agentsandbox.EgressPolicy{Mode: "public"}, agentsandbox.EgressPolicy{Mode: "public"}, nil},
		{"OKPublicWithDeny", agentsandbox.EgressPolicy{Mode: "public", Deny: []string{"Evil.example"}},
			agentsandbox.EgressPolicy{Mode: "public", Deny: []string{"evil.example"}}, nil},
		{"OKAllowCanonical", agentsandbox.EgressPolicy{Mode: "allow",
			Allow: agentsandbox.EgressHosts("PyPI.org", "*.PythonHosted.org", "registry.npmjs.org:443", "192.0.2.7", "2001:DB8::1",
				"[2001:db8::2]:80", "bücher.example", "*.XN--BCHER-KVA.example:443"),
			Deny: []string{"evil.pypi.org"}},
			agentsandbox.EgressPolicy{Mode: "allow",
				Allow: agentsandbox.EgressHosts("pypi.org", "*.pythonhosted.org", "registry.npmjs.org:443", "192.0.2.7", "2001:db8::1",
					"[2001:db8::2]:80", "xn--bcher-kva.example", "*.xn--bcher-kva.example:443"),
				Deny: []string{"evil.pypi.org"}}, nil},
		{"ErrNoMode", agentsandbox.EgressPolicy{}, agentsandbox.EgressPolicy{},
			&Error{"mode", "the mode is required: none, public, allow"}},
		{"ErrUnknownMode", agentsandbox.EgressPolicy{Mode: "open"}, agentsandbox.EgressPolicy{},
			&Error{"mode", `unknown mode "open": use none, public, allow`}},
		{"ErrNoneWithEntries", agentsandbox.EgressPolicy{Mode: "none", Deny: []string{"a.example"}}, agentsandbox.EgressPolicy{},
			&Error{"mode", "mode none reaches nothing and takes no allow or deny entries"}},
		{"ErrPublicWithAllow", agentsandbox.EgressPolicy{Mode: "public", Allow: agentsandbox.EgressHosts("a.example")}, agentsandbox.EgressPolicy{},
			&Error{"allow", "allow entries are for mode allow; mode public reaches every public address (add deny entries to refuse some)"}},
		{"ErrAllowEmpty", allowList(), agentsandbox.EgressPolicy{},
			&Error{"allow", "mode allow needs at least one entry (or use mode none for no egress)"}},
		{"ErrPortNotTheWorkers", allowList("a.example", "b.example:8080"), agentsandbox.EgressPolicy{},
			&Error{"allow[1]", `"b.example:8080": port 8080 is not one of this worker's egress ports (80, 443)`}},
		{"ErrPortNotDecimal", allowList("a.example:0443"), agentsandbox.EgressPolicy{},
			&Error{"allow[0]", `"a.example:0443": port "0443" is not a decimal port number`}},
		{"ErrEmptyPort", allowList("a.example:"), agentsandbox.EgressPolicy{},
			&Error{"allow[0]", `"a.example:": empty port after ':'`}},
		{"ErrTrailingDot", allowList("pypi.org."), agentsandbox.EgressPolicy{},
			&Error{"allow[0]", `"pypi.org.": trailing dot: write the name without it`}},
		{"ErrWildcardInside", allowList("a.*.example"), agentsandbox.EgressPolicy{},
			&Error{"allow[0]", `"a.*.example": a wildcard is only "*." at the start, matching one or more labels (e.g. *.example.org)`}},
		{"ErrBareStar", allowList("*"), agentsandbox.EgressPolicy{},
			&Error{"allow[0]", `"*": a wildcard is only "*." at the start, matching one or more labels (e.g. *.example.org)`}},
		{"ErrWildcardLiteral", allowList("*.192.0.2.7"), agentsandbox.EgressPolicy{},
			&Error{"allow[0]", `"*.192.0.2.7": 192.0.2.7 is an address: a wildcard takes a name`}},
		{"ErrNumericName", allowList("127.1"), agentsandbox.EgressPolicy{},
			&Error{"allow[0]", `"127.1": not a host name: "127.1": numeric form of an address (only dotted-quad is accepted)`}},
		{"ErrBadPunycode", allowList("xn--zz.example"), agentsandbox.EgressPolicy{},
			&Error{"allow[0]", `"xn--zz.example": not a valid internationalised name: idna: invalid label "zz"`}},
		{"ErrEmpty", agentsandbox.EgressPolicy{Mode: "public", Deny: []string{""}}, agentsandbox.EgressPolicy{},
			&Error{"deny[0]", `"": empty entry`}},
		{"ErrSpace", allowList(" pypi.org"), agentsandbox.EgressPolicy{},
			&Error{"allow[0]", `" pypi.org": not a host name: " pypi.org": not a lower-case ASCII name`}},
		{"ErrZone", allowList("fe80::1%eth0"), agentsandbox.EgressPolicy{},
			&Error{"allow[0]", `"fe80::1%eth0": zone ids are not allowed`}},
		{"ErrV6PortWithoutBrackets", allowList("[2001:db8::1]443"), agentsandbox.EgressPolicy{},
			&Error{"allow[0]", `"[2001:db8::1]443": after ] comes :port or nothing`}},
		{"ErrBracketsName", allowList("[pypi.org]:443"), agentsandbox.EgressPolicy{},
			&Error{"allow[0]", `"[pypi.org]:443": brackets hold an IPv6 address without zone, e.g. [2001:db8::1]:443`}},
		{"ErrUserinfo", allowList("u@pypi.org"), agentsandbox.EgressPolicy{},
			&Error{"allow[0]", `"u@pypi.org": not a host name: "u@pypi.org": brackets, userinfo or path in host`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.in, Limits{})
			if tc.err != nil {
				if diff := cmp.Diff(error(tc.err), err, cmp.Comparer(func(a, b error) bool { return a.Error() == b.Error() })); diff != "" {
					t.Fatalf("error (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, p.Spec()); diff != "" {
				t.Fatalf("spec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompileMaxEntries(t *testing.T) {
	many := make([]string, 257)
	for i := range many {
		many[i] = fmt.Sprintf("h%d.example", i)
	}
	if _, err := Compile(allowList(many[:256]...), Limits{}); err != nil {
		t.Fatalf("256 entries: %v", err)
	}
	_, err := Compile(agentsandbox.EgressPolicy{Mode: "allow", Allow: agentsandbox.EgressHosts(many[:200]...), Deny: many[200:]}, Limits{})
	want := "allow: the policy has 257 entries; this worker takes at most 256 (allow and deny together)"
	if err == nil || err.Error() != want {
		t.Fatalf("257 entries: %v, want %q", err, want)
	}
	if _, err := Compile(allowList(many[:11]...), Limits{MaxEntries: 10}); err == nil || !strings.Contains(err.Error(), "at most 10") {
		t.Fatalf("a configured limit of 10: %v", err)
	}
}

// TestDecide: the matcher, by name, wildcard, literal and port; deny wins.
func TestDecide(t *testing.T) {
	p, err := Compile(agentsandbox.EgressPolicy{Mode: "allow",
		Allow: agentsandbox.EgressHosts("pypi.org", "*.pythonhosted.org", "registry.npmjs.org:443", "192.0.2.7:443", "2001:db8::1",
			"*.xn--bcher-kva.example", "*.example.com"),
		Deny: []string{"evil.pypi.org", "files.pythonhosted.org:80", "*.bad.example.com"}}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host   string
		port   uint16
		ok     bool
		detail string
	}{
		{"pypi.org", 443, true, ""},
		{"pypi.org", 80, true, ""},
		{"www.pypi.org", 443, false, "www.pypi.org:443 is not in the allow list"},
		{"evil.pypi.org", 443, false, `evil.pypi.org:443 matches deny entry "evil.pypi.org"`},
		{"files.pythonhosted.org", 443, true, ""},
		{"a.b.files.pythonhosted.org", 443, true, ""}, // one or more labels
		{"pythonhosted.org", 443, false, "pythonhosted.org:443 is not in the allow list"},
		{"xpythonhosted.org", 443, false, "xpythonhosted.org:443 is not in the allow list"},
		{"files.pythonhosted.org", 80, false, `files.pythonhosted.org:80 matches deny entry "files.pythonhosted.org:80"`},
		{"registry.npmjs.org", 443, true, ""},
		{"registry.npmjs.org", 80, false, "registry.npmjs.org:80 is not in the allow list"},
		{"192.0.2.7", 443, true, ""},
		{"192.0.2.7", 80, false, "192.0.2.7:80 is not in the allow list"},
		{"192.0.2.8", 443, false, "192.0.2.8:443 is not in the allow list"},
		{"2001:db8::1", 80, true, ""},
		{"shop.xn--bcher-kva.example", 443, true, ""},
		{"a.example.com", 443, true, ""},
		{"x.bad.example.com", 443, false, `x.bad.example.com:443 matches deny entry "*.bad.example.com"`},
		{"bad.example.com", 443, true, ""}, // the deny wildcard needs a label more
	} {
		t.Run(fmt.Sprintf("%s:%d", tc.host, tc.port), func(t *testing.T) {
			ok, detail := p.Decide(tc.host, tc.port)
			if diff := cmp.Diff([]any{tc.ok, tc.detail}, []any{ok, detail}); diff != "" {
				t.Fatalf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideModes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    agentsandbox.EgressPolicy
		ok    bool
		named bool
	}{
		{"Public", agentsandbox.EgressPolicy{Mode: "public"}, true, false},
		{"PublicDenied", agentsandbox.EgressPolicy{Mode: "public", Deny: []string{"*.example"}}, false, true},
		{"None", agentsandbox.EgressPolicy{Mode: "none"}, false, false},
		{"AllowOther", allowList("other.example"), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.in, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if ok, _ := p.Decide("a.example", 443); ok != tc.ok || p.Named() != tc.named {
				t.Fatalf("Decide ok=%v Named=%v, want %v %v", ok, p.Named(), tc.ok, tc.named)
			}
		})
	}
}

func TestParseRulesPorts(t *testing.T) {
	r, err := ParseRules("deny", []string{"a.example:8443"}, Limits{Ports: []uint16{8443}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Match("a.example", 8443); !ok || r.Len() != 1 {
		t.Fatal("a configured port is not matched")
	}
	if _, err := ParseRules("deny", []string{"a.example:443"}, Limits{Ports: []uint16{8443}}); err == nil {
		t.Fatal("a port outside the configured ones was accepted")
	}
}

// TestRanges: CIDR entries compile to their canonical form, match literal
// destinations in them, and (MatchAddr, DecideAddr) every address a name
// resolves to; literal entries do too.
func TestRanges(t *testing.T) {
	p, err := Compile(agentsandbox.EgressPolicy{Mode: "public",
		Deny: []string{"44.0.0.2", "45.1.0.0/16:443", "[2606:4700::/32]:80", "2a00:1450::/32", "46.0.0.9/32"}}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"44.0.0.2", "45.1.0.0/16:443", "[2606:4700::/32]:80", "2a00:1450::/32", "46.0.0.9"}
	if diff := cmp.Diff(want, p.Spec().Deny); diff != "" {
		t.Fatalf("spec (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		addr   string
		port   uint16
		ok     bool
		detail string
	}{
		{"44.0.0.2", 443, false, `n.test resolves to 44.0.0.2, which matches deny entry "44.0.0.2"`},
		{"::ffff:44.0.0.2", 80, false, `n.test resolves to ::ffff:44.0.0.2, which matches deny entry "44.0.0.2"`},
		{"44.0.0.3", 443, true, ""},
		{"45.1.200.7", 443, false, `n.test resolves to 45.1.200.7, which matches deny entry "45.1.0.0/16:443"`},
		{"45.1.200.7", 80, true, ""},
		{"45.2.0.1", 443, true, ""},
		{"2606:4700:4700::1111", 80, false, `n.test resolves to 2606:4700:4700::1111, which matches deny entry "[2606:4700::/32]:80"`},
		{"2606:4700:4700::1111", 443, true, ""},
		{"2a00:1450:4001::1", 443, false, `n.test resolves to 2a00:1450:4001::1, which matches deny entry "2a00:1450::/32"`},
		{"46.0.0.9", 80, false, `n.test resolves to 46.0.0.9, which matches deny entry "46.0.0.9"`},
	} {
		t.Run(fmt.Sprintf("%s:%d", tc.addr, tc.port), func(t *testing.T) {
			ok, detail := p.DecideAddr("n.test", netip.MustParseAddr(tc.addr), tc.port)
			if diff := cmp.Diff([]any{tc.ok, tc.detail}, []any{ok, detail}); diff != "" {
				t.Fatalf("DecideAddr (-want +got):\n%s", diff)
			}
			// Written as a literal destination, the same address is decided alike.
			if lit, _ := p.Decide(netip.MustParseAddr(tc.addr).String(), tc.port); lit != tc.ok && !strings.HasPrefix(tc.addr, "::ffff:") {
				t.Fatalf("Decide(%s) = %v, want %v", tc.addr, lit, tc.ok)
			}
		})
	}
	for _, tc := range []struct{ name, pattern, msg string }{
		{"ErrHostBits", "45.1.2.0/16", `"45.1.2.0/16": the range's address has bits set past /16: write 45.1.0.0/16`},
		{"ErrBadBits", "45.1.0.0/33", `"45.1.0.0/33": not an address range: write ADDRESS/BITS without zone, e.g. 203.0.113.0/24 or [2001:db8::/32]:443`},
		{"ErrBracketsV4", "[45.1.0.0/16]:443", `"[45.1.0.0/16]:443": brackets hold an IPv6 range, e.g. [2001:db8::/32]:443`},
		{"ErrName", "pypi.org/16", `"pypi.org/16": not an address range: write ADDRESS/BITS without zone, e.g. 203.0.113.0/24 or [2001:db8::/32]:443`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRules("deny", []string{tc.pattern}, Limits{})
			if diff := cmp.Diff("deny[0]: "+tc.msg, fmt.Sprint(err)); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
		})
	}
}

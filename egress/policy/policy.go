// Package policy compiles a sandbox's egress policy (an
// agentsandbox.EgressPolicy: a mode, allow and deny patterns) into the
// matcher the egress guard asks before any lookup, so that a name the
// policy refuses never reaches a resolver. Patterns are exact names,
// wildcards ("*.example.org", one or more labels) and literal addresses,
// each with an optional port that must be one of the worker's. An allow
// entry for a name may carry HTTP rules (methods, path prefixes), which
// the proxy checks on each request to its host (see Policy.CheckRequest).
// Compile validates with errors a person can act on; the worker API uses
// it on create, the proxy when it attaches a sandbox.
package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/hostname"
)

// DefaultMaxEntries bounds the allow and deny entries of one policy
// together, unless Limits says otherwise.
const DefaultMaxEntries = 256

// maxPattern bounds one pattern's length: a 253-byte name, "*.", a port.
const maxPattern = 264

// Limits are what a worker accepts in a policy.
type Limits struct {
	// Ports are the worker's destination ports; a pattern's port must be
	// one of them (default agentsandbox.EgressPorts()).
	Ports []uint16
	// MaxEntries bounds allow and deny together (default DefaultMaxEntries).
	MaxEntries int
}

func (l Limits) withDefaults() Limits {
	if len(l.Ports) == 0 {
		l.Ports = agentsandbox.EgressPorts()
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	return l
}

// Error is a policy a person must fix: Field says where ("mode",
// "allow[2]"), Message what is wrong and what to write instead.
type Error struct {
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Field + ": " + e.Message }

func fail(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Policy is a compiled egress policy. It is immutable and safe for
// concurrent use.
type Policy struct {
	spec  agentsandbox.EgressPolicy
	allow Rules
	deny  Rules
	// rules are those of the allow entries with methods or paths.
	rules []httpRule
}

// Compile validates p against lim and compiles it. The mode is required;
// allow entries are for mode allow only (and it needs at least one); none
// takes no entries. Errors: *Error, naming the field and what to fix.
func Compile(p agentsandbox.EgressPolicy, lim Limits) (*Policy, error) {
	lim = lim.withDefaults()
	switch p.Mode {
	case agentsandbox.EgressNone:
		if len(p.Allow)+len(p.Deny) > 0 {
			return nil, fail("mode", "mode none reaches nothing and takes no allow or deny entries")
		}
	case agentsandbox.EgressPublic:
		if len(p.Allow) > 0 {
			return nil, fail("allow", "allow entries are for mode allow; mode public reaches every public address (add deny entries to refuse some)")
		}
	case agentsandbox.EgressAllow:
		if len(p.Allow) == 0 {
			return nil, fail("allow", "mode allow needs at least one entry (or use mode none for no egress)")
		}
	case "":
		return nil, fail("mode", "the mode is required: %s", strings.Join(agentsandbox.EgressModes(), ", "))
	default:
		return nil, fail("mode", "unknown mode %q: use %s", p.Mode, strings.Join(agentsandbox.EgressModes(), ", "))
	}
	if n := len(p.Allow) + len(p.Deny); n > lim.MaxEntries {
		return nil, fail("allow", "the policy has %d entries; this worker takes at most %d (allow and deny together)", n, lim.MaxEntries)
	}
	hosts := make([]string, len(p.Allow))
	for i, e := range p.Allow {
		hosts[i] = e.Host
	}
	allow, err := ParseRules("allow", hosts, lim)
	if err != nil {
		return nil, err
	}
	deny, err := ParseRules("deny", p.Deny, lim)
	if err != nil {
		return nil, err
	}
	entries, rules, err := compileHTTPRules(p.Allow, allow.list, deny, lim)
	if err != nil {
		return nil, err
	}
	return &Policy{spec: agentsandbox.EgressPolicy{Mode: p.Mode, Allow: entries, Deny: deny.patterns()},
		allow: allow, deny: deny, rules: rules}, nil
}

// Spec is the policy as compiled: names in lower case and punycode,
// literals in their canonical form, entries in the order given.
func (p *Policy) Spec() agentsandbox.EgressPolicy {
	s := p.spec
	s.Allow, s.Deny = slices.Clone(s.Allow), slices.Clone(s.Deny)
	for i, e := range s.Allow {
		s.Allow[i].Methods, s.Allow[i].Paths = slices.Clone(e.Methods), slices.Clone(e.Paths)
	}
	return s
}

// Mode is the policy's mode.
func (p *Policy) Mode() string { return p.spec.Mode }

// Named reports whether the policy decides by name (mode allow, or any
// deny entry): then what a client says it reaches (a tunnel's TLS SNI, an
// HTTP request's Host) must be the name that was checked.
func (p *Policy) Named() bool { return p.spec.Mode == agentsandbox.EgressAllow || p.deny.Len() > 0 }

// Decide says whether the policy lets a sandbox reach host (a canonical,
// lower-case name or address literal, see internal/hostname) on port, and
// why not, for a log. It never resolves: deny wins, then mode allow needs an
// allow entry; mode public allows what deny does not refuse; mode none
// allows nothing.
func (p *Policy) Decide(host string, port uint16) (bool, string) {
	if pat, ok := p.deny.Match(host, port); ok {
		return false, fmt.Sprintf("%s:%d matches deny entry %q", host, port, pat)
	}
	switch p.spec.Mode {
	case agentsandbox.EgressPublic:
		return true, ""
	case agentsandbox.EgressAllow:
		if _, ok := p.allow.Match(host, port); ok {
			return true, ""
		}
		return false, fmt.Sprintf("%s:%d is not in the allow list", host, port)
	}
	return false, "mode " + p.spec.Mode
}

// DecideAddr says whether the policy's deny entries that are addresses or
// ranges let a sandbox reach a, one of the addresses host resolved to, on
// port, and why not: a denied address is refused under every name that
// resolves to it. Allow entries never allow by address (a name is allowed
// by name).
func (p *Policy) DecideAddr(host string, a netip.Addr, port uint16) (bool, string) {
	if pat, ok := p.deny.MatchAddr(a, port); ok {
		return false, fmt.Sprintf("%s resolves to %s, which matches deny entry %q", host, a, pat)
	}
	return true, ""
}

// Rules are compiled patterns (an allow or deny list).
type Rules struct {
	exact    map[string]ports
	wildcard map[string]ports // by the suffix after "*."
	literal  map[netip.Addr]ports
	ranges   []addrRange // in the order given
	list     []string
}

// addrRange is the ports of the entries for one CIDR range.
type addrRange struct {
	prefix netip.Prefix
	ports  ports
}

// ports are the ports of the entries for one name; any when an entry has
// no port. pattern is the first such entry, for a log.
type ports struct {
	any     bool
	ports   []uint16
	pattern string
}

func (ps ports) has(port uint16) bool { return ps.any || slices.Contains(ps.ports, port) }

// ParseRules compiles patterns (field names them in errors, e.g. "deny").
// Errors: *Error for the first bad pattern, saying what to write instead.
func ParseRules(field string, patterns []string, lim Limits) (Rules, error) {
	lim = lim.withDefaults()
	r := Rules{exact: map[string]ports{}, wildcard: map[string]ports{}, literal: map[netip.Addr]ports{}}
	ranges := map[netip.Prefix]int{} // index in r.ranges
	for i, raw := range patterns {
		e, err := parse(raw, lim.Ports)
		if err != nil {
			return Rules{}, fail(fmt.Sprintf("%s[%d]", field, i), "%q: %s", clip(raw), err.Message)
		}
		switch {
		case e.prefix.IsValid():
			i, ok := ranges[e.prefix]
			if !ok {
				i = len(r.ranges)
				ranges[e.prefix] = i
				r.ranges = append(r.ranges, addrRange{prefix: e.prefix})
			}
			r.ranges[i].ports = e.add(r.ranges[i].ports)
		case e.addr.IsValid():
			r.literal[e.addr] = e.add(r.literal[e.addr])
		case e.wildcard:
			r.wildcard[e.name] = e.add(r.wildcard[e.name])
		default:
			r.exact[e.name] = e.add(r.exact[e.name])
		}
		r.list = append(r.list, e.String())
	}
	return r, nil
}

// Len is the number of patterns.
func (r Rules) Len() int { return len(r.list) }

func (r Rules) patterns() []string { return slices.Clone(r.list) }

// Match reports whether host (canonical, lower case) on port matches a
// pattern, and which. A wildcard matches names with one or more labels
// before its suffix, never the suffix itself; a literal or range pattern
// matches only an address written as a literal (for the addresses a name
// resolves to, see MatchAddr).
func (r Rules) Match(host string, port uint16) (string, bool) {
	if len(r.list) == 0 {
		return "", false
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return r.MatchAddr(a, port)
	}
	if ps, ok := r.exact[host]; ok && ps.has(port) {
		return ps.pattern, true
	}
	if len(r.wildcard) == 0 {
		return "", false
	}
	for i := 0; i < len(host); i++ {
		if host[i] != '.' {
			continue
		}
		if ps, ok := r.wildcard[host[i+1:]]; ok && ps.has(port) {
			return ps.pattern, true
		}
	}
	return "", false
}

// MatchAddr reports whether address a on port matches a literal or range
// pattern, and which. An IPv4-mapped address matches as the IPv4 address
// it holds.
func (r Rules) MatchAddr(a netip.Addr, port uint16) (string, bool) {
	for _, x := range []netip.Addr{a, a.Unmap()} {
		if ps, ok := r.literal[x]; ok && ps.has(port) {
			return ps.pattern, true
		}
		for _, ar := range r.ranges {
			if ar.prefix.Contains(x) && ar.ports.has(port) {
				return ar.ports.pattern, true
			}
		}
	}
	return "", false
}

// entry is one parsed pattern.
type entry struct {
	name     string       // lower-case ASCII name (the suffix for a wildcard)
	wildcard bool         // "*." + name
	addr     netip.Addr   // a literal
	prefix   netip.Prefix // a range (CIDR) of more than one address
	port     uint16       // 0: any of the worker's ports
}

func (e entry) add(ps ports) ports {
	if ps.pattern == "" {
		ps.pattern = e.String()
	}
	if e.port == 0 {
		ps.any = true
	} else if !slices.Contains(ps.ports, e.port) {
		ps.ports = append(ps.ports, e.port)
	}
	return ps
}

// String is the pattern in canonical form.
func (e entry) String() string {
	host := e.name
	switch {
	case e.prefix.IsValid():
		host = e.prefix.String()
		if e.prefix.Addr().Is6() && e.port != 0 {
			host = "[" + host + "]"
		}
	case e.addr.IsValid():
		host = e.addr.String()
		if e.addr.Is6() && e.port != 0 {
			host = "[" + host + "]"
		}
	case e.wildcard:
		host = "*." + host
	}
	if e.port != 0 {
		return host + ":" + strconv.Itoa(int(e.port))
	}
	return host
}

// parse reads one pattern: [*.]name[:port], IPv4[/bits][:port],
// IPv6[/bits] or [IPv6[/bits]][:port].
func parse(raw string, allowed []uint16) (entry, *Error) {
	if raw == "" {
		return entry{}, fail("", "empty entry")
	}
	if len(raw) > maxPattern {
		return entry{}, fail("", "longer than %d bytes", maxPattern)
	}
	host, portText, err := splitPort(raw)
	if err != nil {
		return entry{}, err
	}
	var e entry
	if portText != "" {
		n, perr := strconv.ParseUint(portText, 10, 16)
		if perr != nil || n == 0 || strconv.FormatUint(n, 10) != portText {
			return entry{}, fail("", "port %q is not a decimal port number", portText)
		}
		if !slices.Contains(allowed, uint16(n)) {
			return entry{}, fail("", "port %d is not one of this worker's egress ports %s", n, portList(allowed))
		}
		e.port = uint16(n)
	}
	if strings.Contains(host, "/") {
		return parseRange(host, e)
	}
	if strings.HasPrefix(host, "[") {
		a, aerr := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
		if !strings.HasSuffix(host, "]") || aerr != nil || !a.Is6() || a.Zone() != "" {
			return entry{}, fail("", "brackets hold an IPv6 address without zone, e.g. [2001:db8::1]:443")
		}
		e.addr = a
		return e, nil
	}
	if a, aerr := netip.ParseAddr(host); aerr == nil {
		if a.Zone() != "" {
			return entry{}, fail("", "zone ids are not allowed")
		}
		e.addr = a
		return e, nil
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		e.wildcard, host = true, rest
	}
	if strings.Contains(host, "*") {
		return entry{}, fail("", "a wildcard is only \"*.\" at the start, matching one or more labels (e.g. *.example.org)")
	}
	name, nerr := canonicalName(host)
	if nerr != nil {
		return entry{}, nerr
	}
	e.name = name
	return e, nil
}

// parseRange reads the CIDR range of a pattern (e, its port already read):
// IPv4/bits, IPv6/bits or [IPv6/bits]; a range of one address is that
// address.
func parseRange(host string, e entry) (entry, *Error) {
	bracketed := strings.HasPrefix(host, "[")
	text := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	p, err := netip.ParsePrefix(text)
	switch {
	case err != nil || strings.Contains(text, "%"):
		return entry{}, fail("", "not an address range: write ADDRESS/BITS without zone, e.g. 203.0.113.0/24 or [2001:db8::/32]:443")
	case bracketed && !p.Addr().Is6():
		return entry{}, fail("", "brackets hold an IPv6 range, e.g. [2001:db8::/32]:443")
	case p.Masked() != p:
		return entry{}, fail("", "the range's address has bits set past /%d: write %s", p.Bits(), p.Masked())
	case p.IsSingleIP():
		e.addr = p.Addr().Unmap()
		return e, nil
	}
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	e.prefix = p
	return e, nil
}

// splitPort splits "host:port"; a bare IPv6 literal has no port.
func splitPort(raw string) (string, string, *Error) {
	if strings.HasPrefix(raw, "[") {
		end := strings.IndexByte(raw, ']')
		switch {
		case end < 0:
			return "", "", fail("", "unclosed bracket")
		case end == len(raw)-1:
			return raw, "", nil
		case raw[end+1] != ':':
			return "", "", fail("", "after ] comes :port or nothing")
		}
		return raw[:end+1], raw[end+2:], nil
	}
	switch strings.Count(raw, ":") {
	case 0:
		return raw, "", nil
	case 1:
		host, port, _ := strings.Cut(raw, ":")
		if port == "" {
			return "", "", fail("", "empty port after ':'")
		}
		return host, port, nil
	}
	return raw, "", nil // an IPv6 literal, or an error parse reports
}

// canonicalName lower-cases a name and converts it to punycode (IDNA
// lookup rules) when it holds non-ASCII or punycode labels, then requires
// the canonical form the guard accepts (see internal/hostname).
func canonicalName(host string) (string, *Error) {
	if strings.HasSuffix(host, ".") {
		return "", fail("", "trailing dot: write the name without it")
	}
	name := strings.ToLower(host)
	if !isASCII(name) || strings.Contains(name, "xn--") {
		a, err := idna.Lookup.ToASCII(name)
		if err != nil {
			return "", fail("", "not a valid internationalised name: %v", err)
		}
		name = a
	}
	a, literal, problem := hostname.Parse(name)
	switch {
	case problem != "":
		return "", fail("", "not a host name: %s", problem)
	case literal:
		return "", fail("", "%s is an address: a wildcard takes a name", a)
	}
	return name, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func portList(ps []uint16) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(int(p))
	}
	return "(" + strings.Join(s, ", ") + ")"
}

// clip bounds a pattern quoted in an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

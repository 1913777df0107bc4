package egress

import (
	"net/netip"
	"strings"
)

// parseHost accepts only canonical (lower-cased) hosts and refuses the rest with
// ReasonNotCanonical (it never normalises): a dotted-quad IPv4 literal
// without leading zeros, an IPv6 literal without zone, or a lower-case LDH
// name that does not end in a numeric label. Forms some clients read as IPv4
// (2130706433, 0177.0.0.1, 0x7f.1, 127.1) are refused rather than guessed
// at, as are zone ids, trailing dots, userinfo, ports and brackets left in
// the host, and non-ASCII names (send punycode).
func parseHost(host string) (netip.Addr, bool, Verdict) {
	switch {
	case host == "":
		return netip.Addr{}, false, refuse(ReasonNotCanonical, "empty host")
	case strings.Contains(host, "%"):
		return netip.Addr{}, false, refuse(ReasonNotCanonical, "%q: zone id or escape", host)
	case strings.ContainsAny(host, "[]@/\\?#"):
		return netip.Addr{}, false, refuse(ReasonNotCanonical, "%q: brackets, userinfo or path in host", host)
	case strings.HasSuffix(host, "."):
		return netip.Addr{}, false, refuse(ReasonNotCanonical, "%q: trailing dot", host)
	}
	if strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return netip.Addr{}, false, refuse(ReasonNotCanonical, "%q: not an IPv6 literal", host)
		}
		return a, true, Verdict{}
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Is4() {
		return a, true, Verdict{}
	}
	if v := checkName(host); v.Reason != "" {
		return netip.Addr{}, false, v
	}
	return netip.Addr{}, false, Verdict{}
}

// checkName accepts a lower-case LDH name (underscores allowed) whose last
// label is not numeric: a name ending in a number is what URL parsers read
// as an IPv4 address in one of its non-canonical forms.
func checkName(host string) Verdict {
	if len(host) > 253 {
		return refuse(ReasonNotCanonical, "name longer than 253 bytes")
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return refuse(ReasonNotCanonical, "%q: empty, long or hyphen-edged label", host)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return refuse(ReasonNotCanonical, "%q: not a lower-case ASCII name", host)
			}
		}
	}
	if numeric(labels[len(labels)-1]) {
		return refuse(ReasonNotCanonical, "%q: numeric form of an address (only dotted-quad is accepted)", host)
	}
	return Verdict{}
}

// numeric reports whether a label is a number in the WHATWG URL sense
// (decimal, or 0x-prefixed hex), which makes the whole host an IPv4 form.
func numeric(l string) bool {
	digits := "0123456789"
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		l, digits = l[2:], "0123456789abcdefABCDEF"
		if l == "" {
			return true
		}
	}
	for i := 0; i < len(l); i++ {
		if !strings.ContainsRune(digits, rune(l[i])) {
			return false
		}
	}
	return true
}

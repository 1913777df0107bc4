// Package hostname decides whether a host, as a client wrote it, is in the
// one canonical form the egress guard accepts: a dotted-quad IPv4 literal,
// an IPv6 literal, or a lower-case LDH name that does not end in a numeric
// label. It never normalises: the other forms some clients read as
// addresses are refused, not guessed at. The guard and the in-sandbox
// resolver share it.
package hostname

import (
	"fmt"
	"net/netip"
	"strings"
)

// Parse accepts only canonical (lower-cased) hosts: a dotted-quad IPv4
// literal without leading zeros, an IPv6 literal without zone, or a
// lower-case LDH name that does not end in a numeric label; for a literal it
// returns the address and literal true. Forms some clients read as IPv4
// (2130706433, 0177.0.0.1, 0x7f.1, 127.1) are refused rather than guessed
// at, as are zone ids, trailing dots, userinfo, ports and brackets left in
// the host, and non-ASCII names (send punycode): problem then says why, for
// a log.
func Parse(host string) (addr netip.Addr, literal bool, problem string) {
	switch {
	case host == "":
		return netip.Addr{}, false, "empty host"
	case strings.Contains(host, "%"):
		return netip.Addr{}, false, fmt.Sprintf("%q: zone id or escape", host)
	case strings.ContainsAny(host, "[]@/\\?#"):
		return netip.Addr{}, false, fmt.Sprintf("%q: brackets, userinfo or path in host", host)
	case strings.HasSuffix(host, "."):
		return netip.Addr{}, false, fmt.Sprintf("%q: trailing dot", host)
	}
	if strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return netip.Addr{}, false, fmt.Sprintf("%q: not an IPv6 literal", host)
		}
		return a, true, ""
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Is4() {
		return a, true, ""
	}
	if p := checkName(host); p != "" {
		return netip.Addr{}, false, p
	}
	return netip.Addr{}, false, ""
}

// checkName accepts a lower-case LDH name (underscores allowed) whose last
// label is not numeric: a name ending in a number is what URL parsers read
// as an IPv4 address in one of its non-canonical forms.
func checkName(host string) string {
	if len(host) > 253 {
		return "name longer than 253 bytes"
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Sprintf("%q: empty, long or hyphen-edged label", host)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Sprintf("%q: not a lower-case ASCII name", host)
			}
		}
	}
	if numeric(labels[len(labels)-1]) {
		return fmt.Sprintf("%q: numeric form of an address (only dotted-quad is accepted)", host)
	}
	return ""
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

package policy

import (
	"fmt"
	"slices"
	"strings"

	"openvibe.network/agentsandbox"
)

// RuleMethods are the HTTP methods an allow entry's rules may name.
var ruleMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// Bounds of one entry's rules.
const (
	maxRulePaths = 64
	maxRulePath  = 512
)

// httpRule is the compiled rules of one allow entry: requests to a host
// its pattern matches must use one of its methods (none: any) on a path
// under one of its paths (none: any).
type httpRule struct {
	host    Rules
	pattern string
	methods []string
	paths   []pathPattern
}

// pathPattern is one compiled path prefix: its segments (percent-escapes
// of unreserved characters decoded, the others in upper case; "*" stands
// for one non-empty segment) and whether it ends with '/' (then the path
// must go on past them).
type pathPattern struct {
	segs []string
	dir  bool
}

// compileHTTPRules validates the rules of allow's entries (canon: their
// patterns in canonical form, in order) and compiles them; entries is the
// allow list in canonical form. A rule is for a host name (not an address
// or range) that deny does not refuse, and no entry without rules may
// name the same pattern. Errors: *Error naming allow[i] and what to fix.
func compileHTTPRules(allow []agentsandbox.EgressEntry, canon []string, deny Rules, lim Limits) ([]agentsandbox.EgressEntry, []httpRule, error) {
	if len(allow) == 0 {
		return nil, nil, nil
	}
	entries := make([]agentsandbox.EgressEntry, len(allow))
	var rules []httpRule
	ruled := map[string]int{}
	for i, e := range allow {
		entries[i] = agentsandbox.EgressEntry{Host: canon[i]}
		if !e.HasRules() {
			continue
		}
		field := fmt.Sprintf("allow[%d]", i)
		r, err := ParseRules(field, []string{e.Host}, lim)
		if err != nil {
			return nil, nil, err
		}
		if len(r.literal)+len(r.ranges) > 0 {
			return nil, nil, fail(field, "%q is an address: methods and paths are for host names, whose HTTPS the proxy can terminate with a certificate for the name", clip(e.Host))
		}
		host, port := canon[i], uint16(SecretPort)
		if j := strings.LastIndexByte(host, ':'); j >= 0 {
			host = host[:j]
			port = 0
		}
		probe := host
		if rest, ok := strings.CutPrefix(host, "*."); ok {
			probe = "any." + rest
		}
		for _, p := range lim.withDefaults().Ports {
			if port != 0 || p == SecretPort {
				if pat, ok := deny.Match(probe, p); ok {
					return nil, nil, fail(field, "%q has methods or paths, but deny entry %q refuses it: remove one of them", clip(e.Host), pat)
				}
			}
		}
		hr := httpRule{host: r, pattern: canon[i]}
		if hr.methods, err = compileMethods(field, e.Methods); err != nil {
			return nil, nil, err
		}
		if e.Paths != nil {
			if len(e.Paths) == 0 {
				return nil, nil, fail(field+".paths", "empty: list path prefixes (e.g. [\"/repos/acme/\"]) or leave paths out for any path")
			}
			if len(e.Paths) > maxRulePaths {
				return nil, nil, fail(field+".paths", "%d paths; at most %d are allowed", len(e.Paths), maxRulePaths)
			}
			canonPaths := make([]string, len(e.Paths))
			for j, raw := range e.Paths {
				pp, c, problem := parsePathPattern(raw)
				if problem != "" {
					return nil, nil, fail(fmt.Sprintf("%s.paths[%d]", field, j), "%q: %s", clip(raw), problem)
				}
				hr.paths = append(hr.paths, pp)
				canonPaths[j] = c
			}
			entries[i].Paths = canonPaths
		}
		entries[i].Methods = slices.Clone(hr.methods)
		ruled[canon[i]] = i
		rules = append(rules, hr)
	}
	for i, e := range allow {
		if j, ok := ruled[canon[i]]; ok && !e.HasRules() {
			return nil, nil, fail(fmt.Sprintf("allow[%d]", i), "%q also has methods or paths in allow[%d], which hold every request to it: remove this entry (or give it rules of its own)", canon[i], j)
		}
	}
	return entries, rules, nil
}

// compileMethods validates methods (nil: any) and returns them in upper
// case, each once, in the order given.
func compileMethods(field string, methods []string) ([]string, error) {
	if methods == nil {
		return nil, nil
	}
	if len(methods) == 0 {
		return nil, fail(field+".methods", "empty: list methods (e.g. [\"GET\"]) or leave methods out for any method")
	}
	var out []string
	for j, m := range methods {
		u := strings.ToUpper(m)
		if !slices.Contains(ruleMethods, u) {
			return nil, fail(fmt.Sprintf("%s.methods[%d]", field, j), "unknown method %q: use %s", clip(m), strings.Join(ruleMethods, ", "))
		}
		if !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out, nil
}

// parsePathPattern compiles a path prefix and returns it in canonical form,
// or what is wrong with it.
func parsePathPattern(raw string) (pathPattern, string, string) {
	switch {
	case !strings.HasPrefix(raw, "/"):
		return pathPattern{}, "", "a path starts with '/', e.g. /repos/acme/"
	case len(raw) > maxRulePath:
		return pathPattern{}, "", fmt.Sprintf("longer than %d bytes", maxRulePath)
	case strings.ContainsAny(raw, "?#"):
		return pathPattern{}, "", "a path prefix has no query or fragment: remove from '?' or '#' on"
	}
	if problem := pathProblem(raw); problem != "" {
		return pathPattern{}, "", problem
	}
	body := raw[1:]
	var pp pathPattern
	if rest, ok := strings.CutSuffix(body, "/"); ok {
		body, pp.dir = rest, true
	}
	if body == "" {
		return pathPattern{}, "/", "" // every path
	}
	for _, seg := range strings.Split(body, "/") {
		switch {
		case seg == "":
			return pathPattern{}, "", "an empty segment (\"//\"): write each segment once"
		case strings.Contains(seg, "*") && seg != "*":
			return pathPattern{}, "", "a * stands for one whole segment, e.g. /repos/*/issues"
		}
		pp.segs = append(pp.segs, normalSegment(seg))
	}
	c := "/" + strings.Join(pp.segs, "/")
	if pp.dir {
		c += "/"
	}
	return pp, c, ""
}

// normalSegment decodes seg's escapes of unreserved characters and writes
// the others' hex digits in upper case (seg passed pathProblem).
func normalSegment(seg string) string {
	var b strings.Builder
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c == '%' {
			v := unhex(seg[i+1])<<4 | unhex(seg[i+2])
			if unreserved(v) {
				b.WriteByte(v)
			} else {
				b.WriteString(seg[i : i+1])
				b.WriteString(strings.ToUpper(seg[i+1 : i+3]))
			}
			i += 2
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// HasHTTPRules reports whether any allow entry has methods or paths.
func (p *Policy) HasHTTPRules() bool { return p != nil && len(p.rules) > 0 }

// HTTPRulesFor reports whether requests to host (canonical, lower case)
// on port are held to an entry's methods and paths (a nil Policy: none
// are).
func (p *Policy) HTTPRulesFor(host string, port uint16) bool {
	if p == nil {
		return false
	}
	for i := range p.rules {
		if p.rules[i].host.matchName(host, port) {
			return true
		}
	}
	return false
}

// CheckRequest says whether a request with method to path (its escaped
// path, as it is sent on: no query) on host:port passes the rules of the
// allow entries whose pattern matches host:port, and why not. A host
// without rules passes. With rules, the request must pass one matching
// entry's: method among its methods (exactly: HTTP methods are
// case-sensitive) and path under one of its paths. A path the servers
// behind could read in more than one way is refused whatever the rules
// say: a dot segment ("." or "..", escaped or before a ';' too), an
// escaped '/', '\' or '%', an escaped control byte, a bad escape, a
// backslash or a byte outside printable ASCII. An empty segment ("//") is
// never collapsed: it matches no segment of a rule. A nil Policy passes
// every request.
func (p *Policy) CheckRequest(host string, port uint16, method, path string) (bool, string) {
	if p == nil || len(p.rules) == 0 {
		return true, ""
	}
	var first *httpRule
	for i := range p.rules {
		r := &p.rules[i]
		if !r.host.matchName(host, port) {
			continue
		}
		if first == nil {
			if problem := pathProblem(path); problem != "" {
				return false, fmt.Sprintf("the path %q has %s: refused as ambiguous", clip(path), problem)
			}
			first = r
		}
		if r.allows(method, path) {
			return true, ""
		}
	}
	if first == nil {
		return true, ""
	}
	return false, fmt.Sprintf("%s %s is outside the methods and paths allow entry %q gives %s:%d", clip(method), clip(path), first.pattern, host, port)
}

// matchName is Match for rules that hold names only (those of an entry
// with methods or paths), without Match's allocation for a host that is
// no address: an address matches none.
func (r Rules) matchName(host string, port uint16) bool {
	if strings.IndexByte(host, ':') >= 0 || strings.Trim(host, "0123456789.") == "" {
		return false // an address literal
	}
	if ps, ok := r.exact[host]; ok && ps.has(port) {
		return true
	}
	for i := 0; i < len(host); i++ {
		if host[i] == '.' {
			if ps, ok := r.wildcard[host[i+1:]]; ok && ps.has(port) {
				return true
			}
		}
	}
	return false
}

// allows reports whether method and path (which passed pathProblem) pass r.
func (r *httpRule) allows(method, path string) bool {
	if r.methods != nil && !slices.Contains(r.methods, method) {
		return false
	}
	if r.paths == nil {
		return true
	}
	for i := range r.paths {
		if r.paths[i].match(path) {
			return true
		}
	}
	return false
}

// match reports whether path (starting with '/', passed pathProblem) is
// under pp: its first segments are pp's, and it goes on past them when pp
// ends with '/'.
func (pp *pathPattern) match(path string) bool {
	rest := path[1:]
	for k, want := range pp.segs {
		seg, tail, more := strings.Cut(rest, "/")
		if want == "*" && seg == "" || want != "*" && !segmentIs(seg, want) {
			return false
		}
		if k == len(pp.segs)-1 {
			return !pp.dir || more
		}
		if !more {
			return false
		}
		rest = tail
	}
	return true // "/": every path
}

// segmentIs reports whether a request's segment seg (raw, passed
// pathProblem) is want (normalized, see normalSegment), without
// allocating.
func segmentIs(seg, want string) bool {
	j := 0
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c == '%' {
			v := unhex(seg[i+1])<<4 | unhex(seg[i+2])
			if !unreserved(v) {
				if j+3 > len(want) || want[j] != '%' || upper(seg[i+1]) != want[j+1] || upper(seg[i+2]) != want[j+2] {
					return false
				}
				i += 2
				j += 3
				continue
			}
			c = v
			i += 2
		}
		if j >= len(want) || want[j] != c {
			return false
		}
		j++
	}
	return j == len(want)
}

// pathProblem says why a path (or a rule's path prefix) is ambiguous, ""
// when it is not (see CheckRequest).
func pathProblem(p string) string {
	if p == "" || p[0] != '/' {
		return "no leading '/'"
	}
	start := 1
	for i := 1; i <= len(p); i++ {
		if i < len(p) {
			switch c := p[i]; {
			case c == '%':
				if i+2 >= len(p) || !ishex(p[i+1]) || !ishex(p[i+2]) {
					return "a '%' that starts no escape (%XX)"
				}
				switch v := unhex(p[i+1])<<4 | unhex(p[i+2]); {
				case v == '/' || v == '\\':
					return "an escaped slash or backslash (%2F, %5C)"
				case v == '%':
					return "an escaped '%' (%25, a double encoding)"
				case v < 0x20 || v == 0x7f:
					return "an escaped control byte"
				}
				i += 2
				continue
			case c == '\\':
				return "a backslash"
			case c <= ' ' || c >= 0x7f:
				return "a byte outside printable ASCII"
			case c != '/':
				continue
			}
		}
		if dotSegment(p[start:i]) {
			return "a dot segment (. or ..)"
		}
		start = i + 1
	}
	return ""
}

// dotSegment reports whether seg is "." or ".." (a dot escaped as %2E
// too), alone or before a ';' (servers that take path parameters read
// "..;x" as "..").
func dotSegment(seg string) bool {
	dots := 0
	for i := 0; i < len(seg); i++ {
		switch {
		case seg[i] == ';':
			return dots == 1 || dots == 2
		case seg[i] == '.':
			dots++
		case seg[i] == '%' && i+2 < len(seg) && seg[i+1] == '2' && (seg[i+2] == 'e' || seg[i+2] == 'E'):
			dots++
			i += 2
		default:
			return false
		}
	}
	return dots == 1 || dots == 2
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'f' {
		return c - 'a' + 'A'
	}
	return c
}

// unreserved reports whether c is an unreserved character of RFC 3986,
// whose escape means the character itself.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

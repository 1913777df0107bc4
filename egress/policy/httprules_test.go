package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"openvibe.network/agentsandbox"
)

// TestCompileHTTPRules: allow entries with methods and paths compile to
// their canonical form, or to the error a person gets, whole.
func TestCompileHTTPRules(t *testing.T) {
	gh := func(methods, paths []string) agentsandbox.EgressEntry {
		return agentsandbox.EgressEntry{Host: "api.github.com", Methods: methods, Paths: paths}
	}
	pol := func(deny []string, allow ...agentsandbox.EgressEntry) agentsandbox.EgressPolicy {
		return agentsandbox.EgressPolicy{Mode: agentsandbox.EgressAllow, Allow: allow, Deny: deny}
	}
	for _, tc := range []struct {
		name string
		in   agentsandbox.EgressPolicy
		want []agentsandbox.EgressEntry
		err  error
	}{
		{"OKCanonical", pol(nil, agentsandbox.EgressEntry{Host: "API.GitHub.com:443", Methods: []string{"get", "GET", "Post"},
			Paths: []string{"/repos/%61cme/", "/repos/*/issues", "/a%3ab", "/"}}, agentsandbox.EgressEntry{Host: "pypi.org"}),
			[]agentsandbox.EgressEntry{{Host: "api.github.com:443", Methods: []string{"GET", "POST"},
				Paths: []string{"/repos/acme/", "/repos/*/issues", "/a%3Ab", "/"}}, {Host: "pypi.org"}}, nil},
		{"OKTwoEntriesOneHost", pol(nil, gh([]string{"GET"}, nil), gh([]string{"POST"}, []string{"/repos/acme/app/issues"})),
			[]agentsandbox.EgressEntry{gh([]string{"GET"}, nil), gh([]string{"POST"}, []string{"/repos/acme/app/issues"})}, nil},
		{"OKWildcard", pol(nil, agentsandbox.EgressEntry{Host: "*.github.com", Paths: []string{"/x"}}),
			[]agentsandbox.EgressEntry{{Host: "*.github.com", Paths: []string{"/x"}}}, nil},
		{"ErrUnknownMethod", pol(nil, gh([]string{"GET", "FETCH"}, nil)), nil,
			&Error{"allow[0].methods[1]", `unknown method "FETCH": use GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS`}},
		{"ErrEmptyMethods", pol(nil, gh([]string{}, nil)), nil,
			&Error{"allow[0].methods", `empty: list methods (e.g. ["GET"]) or leave methods out for any method`}},
		{"ErrEmptyPaths", pol(nil, gh(nil, []string{})), nil,
			&Error{"allow[0].paths", `empty: list path prefixes (e.g. ["/repos/acme/"]) or leave paths out for any path`}},
		{"ErrRelativePath", pol(nil, gh(nil, []string{"/ok", "repos/acme"})), nil,
			&Error{"allow[0].paths[1]", `"repos/acme": a path starts with '/', e.g. /repos/acme/`}},
		{"ErrStarInSegment", pol(nil, gh(nil, []string{"/repos/acme-*"})), nil,
			&Error{"allow[0].paths[0]", `"/repos/acme-*": a * stands for one whole segment, e.g. /repos/*/issues`}},
		{"ErrDoubleSlash", pol(nil, gh(nil, []string{"/repos//acme"})), nil,
			&Error{"allow[0].paths[0]", `"/repos//acme": an empty segment ("//"): write each segment once`}},
		{"ErrDotSegment", pol(nil, gh(nil, []string{"/repos/../acme"})), nil,
			&Error{"allow[0].paths[0]", `"/repos/../acme": a dot segment (. or ..)`}},
		{"ErrQuery", pol(nil, gh(nil, []string{"/search?q=x"})), nil,
			&Error{"allow[0].paths[0]", `"/search?q=x": a path prefix has no query or fragment: remove from '?' or '#' on`}},
		{"ErrAddress", pol(nil, agentsandbox.EgressEntry{Host: "192.0.2.7", Methods: []string{"GET"}}), nil,
			&Error{"allow[0]", `"192.0.2.7" is an address: methods and paths are for host names, whose HTTPS the proxy can terminate with a certificate for the name`}},
		{"ErrDenied", pol([]string{"*.github.com"}, gh([]string{"GET"}, nil)), nil,
			&Error{"allow[0]", `"api.github.com" has methods or paths, but deny entry "*.github.com" refuses it: remove one of them`}},
		{"ErrAlsoPlain", pol(nil, agentsandbox.EgressEntry{Host: "API.github.com"}, gh([]string{"GET"}, nil)), nil,
			&Error{"allow[0]", `"api.github.com" also has methods or paths in allow[1], which hold every request to it: remove this entry (or give it rules of its own)`}},
		{"ErrBadHost", pol(nil, agentsandbox.EgressEntry{Host: "bad host", Methods: []string{"GET"}}), nil,
			&Error{"allow[0]", `"bad host": not a host name: ` + mustProblem(t, "bad host")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.in, Limits{})
			if diff := cmp.Diff(tc.err, err); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, p.Spec().Allow); diff != "" {
				t.Fatalf("allow (-want +got):\n%s", diff)
			}
		})
	}
}

func mustProblem(t *testing.T, host string) string {
	t.Helper()
	_, err := ParseRules("x", []string{host}, Limits{})
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("%q parsed", host)
	}
	return e.Message[len(`"bad host": not a host name: `):]
}

// TestCheckRequest: the rules matcher, by method (case-sensitive), path
// prefix on whole segments, "*" segments, escapes, and the paths refused
// as ambiguous whatever the rules say.
func TestCheckRequest(t *testing.T) {
	p, err := Compile(agentsandbox.EgressPolicy{Mode: agentsandbox.EgressAllow, Allow: []agentsandbox.EgressEntry{
		{Host: "api.github.com", Methods: []string{"get", "HEAD"}, Paths: []string{"/repos/acme/", "/repos/*/issues", "/users/a%7eb", "/raw/a%3Ab"}},
		{Host: "api.github.com", Methods: []string{"POST"}, Paths: []string{"/repos/acme/app/issues"}},
		{Host: "*.example.org:443", Paths: []string{"/v1"}},
		{Host: "pypi.org"},
	}}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	const (
		outside   = `is outside the methods and paths allow entry`
		ambiguous = `refused as ambiguous`
	)
	for _, tc := range []struct {
		name, host   string
		port         uint16
		method, path string
		want         string // "": allowed, else a part of the detail
	}{
		{"Prefix", "api.github.com", 443, "GET", "/repos/acme/app", ""},
		{"PrefixDirItself", "api.github.com", 443, "GET", "/repos/acme/", ""},
		{"PrefixDirWithoutSlash", "api.github.com", 443, "GET", "/repos/acme", outside},
		{"PrefixNotASegment", "api.github.com", 443, "GET", "/repos/acmeevil/x", outside},
		{"Star", "api.github.com", 443, "GET", "/repos/other/issues", ""},
		{"StarPrefix", "api.github.com", 443, "HEAD", "/repos/other/issues/7", ""},
		{"StarNotEmpty", "api.github.com", 443, "GET", "/repos//issues", outside},
		{"StarOneSegment", "api.github.com", 443, "GET", "/repos/a/b/issues", outside},
		{"StarWholeSegment", "api.github.com", 443, "GET", "/repos/other/issuesx", outside},
		{"MethodCase", "api.github.com", 443, "get", "/repos/acme/x", outside},
		{"MethodOutside", "api.github.com", 443, "POST", "/repos/acme/x", outside},
		{"SecondEntry", "api.github.com", 443, "POST", "/repos/acme/app/issues", ""},
		{"SecondEntryPath", "api.github.com", 443, "POST", "/repos/acme/app/pulls", outside},
		{"PlainHTTPPort", "api.github.com", 80, "DELETE", "/repos/acme/x", outside},
		{"EscapedUnreserved", "api.github.com", 443, "GET", "/repos/%61cme/x", ""},
		{"EscapedUnreservedInRule", "api.github.com", 443, "GET", "/users/a~b", ""},
		{"EscapedUnreservedBoth", "api.github.com", 443, "GET", "/users/a%7Eb", ""},
		{"EscapedReservedCase", "api.github.com", 443, "GET", "/raw/a%3ab", ""},
		{"ReservedNotItsEscape", "api.github.com", 443, "GET", "/raw/a:b", outside},
		{"DoubleSlash", "api.github.com", 443, "GET", "/repos//acme/x", outside},
		{"DoubleSlashBeneath", "api.github.com", 443, "GET", "/repos/acme//x", ""},
		{"DotDot", "api.github.com", 443, "GET", "/repos/acme/../../admin", ambiguous},
		{"Dot", "api.github.com", 443, "GET", "/repos/./acme/x", ambiguous},
		{"EscapedDotDot", "api.github.com", 443, "GET", "/repos/acme/%2e%2E/x", ambiguous},
		{"DotDotParam", "api.github.com", 443, "GET", "/repos/acme/..;/admin", ambiguous},
		{"DotsInName", "api.github.com", 443, "GET", "/repos/acme/...", ""},
		{"EscapedSlash", "api.github.com", 443, "GET", "/repos/acme%2Fx", ambiguous},
		{"EscapedSlashLower", "api.github.com", 443, "GET", "/repos/acme/a%2fb", ambiguous},
		{"EscapedBackslash", "api.github.com", 443, "GET", "/repos/acme/a%5cb", ambiguous},
		{"Backslash", "api.github.com", 443, "GET", `/repos/acme/a\b`, ambiguous},
		{"DoubleEncoding", "api.github.com", 443, "GET", "/repos/acme/%252e%252e/x", ambiguous},
		{"BadEscape", "api.github.com", 443, "GET", "/repos/acme/%zz", ambiguous},
		{"CutEscape", "api.github.com", 443, "GET", "/repos/acme/%2", ambiguous},
		{"EscapedNUL", "api.github.com", 443, "GET", "/repos/acme/%00", ambiguous},
		{"NotASlash", "api.github.com", 443, "OPTIONS", "*", ambiguous},
		{"Wildcard", "a.example.org", 443, "PUT", "/v1/x", ""},
		{"WildcardOutside", "a.example.org", 443, "PUT", "/v2", outside},
		{"WildcardOtherPort", "a.example.org", 80, "PUT", "/v2", ""}, // the entry is for 443 only
		{"NoRules", "pypi.org", 443, "DELETE", "/../x", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, detail := p.CheckRequest(tc.host, tc.port, tc.method, tc.path)
			if ok != (tc.want == "") || tc.want != "" && !strings.Contains(detail, tc.want) {
				t.Fatalf("CheckRequest(%s %s %s:%d) = %v, %q; want %q", tc.method, tc.path, tc.host, tc.port, ok, detail, tc.want)
			}
		})
	}
	if !p.HTTPRulesFor("api.github.com", 443) || !p.HTTPRulesFor("x.example.org", 443) || p.HTTPRulesFor("x.example.org", 80) ||
		p.HTTPRulesFor("pypi.org", 443) || !p.HasHTTPRules() {
		t.Fatal("HTTPRulesFor")
	}
}

// TestEntryJSON: an entry without rules is read and written as a string,
// one with rules as an object; an unknown field or another JSON type is
// refused.
func TestEntryJSON(t *testing.T) {
	in := `{"mode":"allow","allow":["pypi.org",{"host":"api.github.com","methods":["GET"],"paths":["/repos/"]},{"host":"x.org"}]}`
	var p agentsandbox.EgressPolicy
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	want := agentsandbox.EgressPolicy{Mode: "allow", Allow: []agentsandbox.EgressEntry{{Host: "pypi.org"},
		{Host: "api.github.com", Methods: []string{"GET"}, Paths: []string{"/repos/"}}, {Host: "x.org"}}}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Fatalf("decoded (-want +got):\n%s", diff)
	}
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := `{"mode":"allow","allow":["pypi.org",{"host":"api.github.com","methods":["GET"],"paths":["/repos/"]},"x.org"]}`; string(out) != got {
		t.Fatalf("encoded %s", out)
	}
	for _, bad := range []string{`{"mode":"allow","allow":[{"host":"a.org","method":["GET"]}]}`, `{"mode":"allow","allow":[7]}`} {
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Fatalf("%s decoded", bad)
		}
	}
}

// BenchmarkCheckRequest is the rule check's cost per request on a host
// with rules (two entries, three paths), passed and refused; a pass
// allocates nothing.
func BenchmarkCheckRequest(b *testing.B) {
	p, err := Compile(agentsandbox.EgressPolicy{Mode: agentsandbox.EgressAllow, Allow: []agentsandbox.EgressEntry{
		{Host: "api.github.com", Methods: []string{"GET"}, Paths: []string{"/users/", "/repos/acme/", "/repos/*/issues"}},
		{Host: "api.github.com", Methods: []string{"POST"}, Paths: []string{"/repos/acme/app/issues"}},
	}}, Limits{})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, method, path string }{
		{"Pass", "GET", "/repos/other/issues/42"},
		{"PassEscaped", "GET", "/repos/%61cme/app/contents/a%20b"},
		{"Refuse", "DELETE", "/repos/acme/app"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.CheckRequest("api.github.com", 443, bc.method, bc.path)
			}
		})
	}
}

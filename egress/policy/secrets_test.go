package policy

import (
	"strings"
	"testing"

	"openvibe.network/agentsandbox"
)

// TestSecretHosts: host patterns are the policy's, names only, port 443
// only.
func TestSecretHosts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hosts []string
		want  string // "" for OK, else a part of the error
	}{
		{"OK/Name", []string{"api.openai.com"}, ""},
		{"OK/Port443", []string{"api.openai.com:443", "*.github.com"}, ""},
		{"ErrNone", nil, "give the hosts"},
		{"ErrPort80", []string{"api.openai.com:80"}, "secrets.K.hosts[0]"},
		{"ErrAddress", []string{"93.184.216.34"}, "is an address"},
		{"ErrAddress6", []string{"[2001:db8::1]:443"}, "is an address"},
		{"ErrNotAName", []string{"https://api.openai.com/"}, "secrets.K.hosts[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SecretHosts("K", tc.hosts)
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestAllowsSecretHosts: a secret's hosts must be reachable under the
// sandbox's policy.
func TestAllowsSecretHosts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy agentsandbox.EgressPolicy
		hosts  []string
		want   string
	}{
		{"OK/Public", agentsandbox.EgressPolicy{Mode: agentsandbox.EgressPublic}, []string{"api.openai.com"}, ""},
		{"OK/Allowed", agentsandbox.EgressPolicy{Mode: agentsandbox.EgressAllow, Allow: agentsandbox.EgressHosts("api.openai.com")}, []string{"API.openai.com:443"}, ""},
		{"OK/WildcardInWildcard", agentsandbox.EgressPolicy{Mode: agentsandbox.EgressAllow, Allow: agentsandbox.EgressHosts("*.github.com")}, []string{"*.github.com"}, ""},
		{"ErrNotListed", agentsandbox.EgressPolicy{Mode: agentsandbox.EgressAllow, Allow: agentsandbox.EgressHosts("pypi.org")}, []string{"api.openai.com"}, `secrets.K.hosts[0]: "api.openai.com" is not allowed`},
		{"ErrDenied", agentsandbox.EgressPolicy{Mode: agentsandbox.EgressPublic, Deny: []string{"*.openai.com"}}, []string{"api.openai.com"}, "not allowed"},
		{"ErrWiderThanPolicy", agentsandbox.EgressPolicy{Mode: agentsandbox.EgressAllow, Allow: agentsandbox.EgressHosts("api.github.com")}, []string{"*.github.com"}, "not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.policy, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			err = p.AllowsSecretHosts("K", tc.hosts)
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

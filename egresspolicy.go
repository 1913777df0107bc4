package agentsandbox

// Egress modes of a sandbox: what its policy lets it reach through the
// worker's egress proxy.
const (
	// EgressNone: no way out at all (no proxy variables, no bridge).
	EgressNone = "none"
	// EgressPublic: any public address on the worker's ports (the default).
	EgressPublic = "public"
	// EgressAllow: only the names (and literals) the policy lists.
	EgressAllow = "allow"
)

// EgressModes returns every egress mode, in order. The slice is the
// caller's own.
func EgressModes() []string { return []string{EgressNone, EgressPublic, EgressAllow} }

// EgressPolicy is what one sandbox may reach, as the worker API takes and
// shows it. Allow and Deny hold patterns: an exact name ("pypi.org"), a
// wildcard matching one or more labels ("*.pythonhosted.org"), or a literal
// address ("192.0.2.7", "2001:db8::1"), each optionally with ":port" (IPv6
// then in brackets). Deny wins over Allow; Allow is for EgressAllow only.
// The egress package's policy subpackage validates and compiles it.
type EgressPolicy struct {
	Mode  string   `json:"mode"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// IsDefault reports whether p is public mode with no rules of its own (the
// zero value counts as that): the policy every pooled sandbox starts with.
func (p EgressPolicy) IsDefault() bool {
	return (p.Mode == "" || p.Mode == EgressPublic) && len(p.Allow) == 0 && len(p.Deny) == 0
}

// EgressAttachOptions are what the sandbox runtime tells the egress proxy
// when it attaches a sandbox (sandbox.EgressAttacher, implemented by
// egress.Proxy; both name it AttachOptions).
type EgressAttachOptions struct {
	// Policy is what the sandbox may reach (the zero value: public mode).
	Policy EgressPolicy
}

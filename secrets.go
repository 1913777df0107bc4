package agentsandbox

import (
	"log/slog"
	"strings"
)

// SecretPlaceholderPrefix starts every secret's placeholder: what a
// sandbox's environment holds in place of a secret's value.
const SecretPlaceholderPrefix = "agentsandbox-secret-"

// Secret is a credential a sandbox may use but never read: its environment
// gets a placeholder, and the worker's egress proxy puts Value in place of
// the placeholder only in requests to Hosts (egress policy patterns, port
// 443 only). Value lives in the worker's memory for the sandbox's life. Its
// String, GoString and LogValue never show Value.
type Secret struct {
	Value string   `json:"value"`
	Hosts []string `json:"hosts"`
}

// String shows the hosts only.
func (s Secret) String() string { return "secret for " + strings.Join(s.Hosts, ",") }

// GoString shows the hosts only.
func (s Secret) GoString() string { return s.String() }

// LogValue shows the hosts only.
func (s Secret) LogValue() slog.Value { return slog.AnyValue(s.Hosts) }

// EgressSecret is one secret as the egress proxy takes it: its name, the
// placeholder the sandbox holds, the value and the host patterns.
type EgressSecret struct {
	Name, Placeholder, Value string
	Hosts                    []string
}

// String shows the name and hosts only.
func (s EgressSecret) String() string { return s.Name + " for " + strings.Join(s.Hosts, ",") }

// GoString shows the name and hosts only.
func (s EgressSecret) GoString() string { return s.String() }

// LogValue shows the name and hosts only.
func (s EgressSecret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// SecretCAEnv are the variables a sandbox with secrets gets, each set to
// the path of its trust bundle (the host's roots plus the sandbox's CA), so
// that OpenSSL, Python, Node, curl, git and pip trust the proxy's
// interception without flags.
var SecretCAEnv = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT"}

// SandboxCABundle is the path of the system trust bundle inside a sandbox.
const SandboxCABundle = "/etc/ssl/certs/ca-certificates.crt"

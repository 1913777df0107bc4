package workerapi

import (
	"encoding/json"
	"errors"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"openvibe.network/agentsandbox"
)

// CreateRequest is the body of POST /v1/sandboxes.
type CreateRequest struct {
	// TimeBoxMinutes is how long the sandbox lives, 5..30 (default 5).
	TimeBoxMinutes *int `json:"time_box_minutes,omitempty"`
	// Env is added to the environment of every command in the sandbox.
	Env map[string]string `json:"env,omitempty"`
	// Secrets are credentials the sandbox may use but never read, by
	// variable name: the sandbox's environment gets a placeholder for each,
	// and the worker's egress proxy puts the value in place of it only in
	// requests (over HTTPS) to the secret's hosts, which the sandbox's
	// egress policy must allow.
	Secrets map[string]agentsandbox.Secret `json:"secrets,omitempty"`
	// Browser asks for a sandbox with a headless browser: true, or
	// {"start": true} to start it at once rather than at the first
	// connection.
	Browser BrowserOption `json:"browser,omitzero"`
	// Egress is what the sandbox may reach (default: the worker's default,
	// public unless configured otherwise).
	Egress *agentsandbox.EgressPolicy `json:"egress,omitempty"`
	// Limits are the sandbox's own, within the worker's (which its zero or
	// absent fields take).
	Limits *agentsandbox.Limits `json:"limits,omitempty"`
	// Image, when set, is the image the sandbox runs on (pulled first when
	// the worker does not hold it) instead of the host's view.
	Image string `json:"image,omitempty"`
}

// PatchRequest is the body of PATCH /v1/sandboxes/{id}: a new time box,
// secrets to add or rotate, or both (at least one).
type PatchRequest struct {
	// TimeBoxMinutes sets the sandbox's time box anew, counted from when it
	// started as every time box is: 5..30, and not an end already past.
	TimeBoxMinutes *int `json:"time_box_minutes,omitempty"`
	// Secrets adds or rotates secrets, by name, of a sandbox that has a CA
	// (created with secrets, or with an egress allow entry with methods or
	// paths): a name it has keeps its placeholder and the proxy puts the
	// new value in from the next request on; a new name gets a new
	// placeholder, in the environment of the commands started after (and
	// in the answer's SecretPlaceholders). Hosts as at create, within the
	// hosts of the sandbox's secrets and rules at create (its trust bundle
	// cannot change).
	Secrets map[string]agentsandbox.Secret `json:"secrets,omitempty"`
}

// SandboxLimits are the limits of a sandbox as the API shows them.
type SandboxLimits struct {
	MemoryMB       int `json:"memory_mb"`
	DiskMB         int `json:"disk_mb"`
	Pids           int `json:"pids"`
	CPUPercent     int `json:"cpu_percent"`
	TimeBoxMinutes int `json:"time_box_minutes"`
}

// Sandbox describes a sandbox: the answer to a create and an item of a list.
type Sandbox struct {
	ID        string        `json:"id"`
	CreatedAt time.Time     `json:"created_at"`
	ExpiresAt time.Time     `json:"expires_at"`
	Limits    SandboxLimits `json:"limits"`
	// Egress is the policy the sandbox runs under, in canonical form.
	Egress agentsandbox.EgressPolicy `json:"egress"`
	// Secrets are the names of the sandbox's secrets and their hosts;
	// never a value.
	Secrets map[string]SecretInfo `json:"secrets,omitempty"`
	// SecretPlaceholders is in the answer to a PATCH with secrets only:
	// the placeholder of each secret it gave, by name (the value a
	// command's environment holds for it; hand it to a process that was
	// running before the PATCH added the secret).
	SecretPlaceholders map[string]string `json:"secret_placeholders,omitempty"`
	// Browser says whether the sandbox has a headless browser (GET
	// …/browser).
	Browser bool `json:"browser"`
	// Image is the reference the sandbox's image was asked by and
	// ImageDigest its manifest's digest (absent: the host's view).
	Image       string `json:"image,omitempty"`
	ImageDigest string `json:"image_digest,omitempty"`
	// State is "running", or "broken" once its init stopped answering:
	// every call but DELETE then answers 409 sandbox_broken.
	State string `json:"state"`
}

// SecretInfo is what the API shows of a secret: its hosts.
type SecretInfo struct {
	Hosts []string `json:"hosts"`
}

// SandboxState is the answer to GET /v1/sandboxes/{id}: the sandbox, its
// state and what it uses now.
type SandboxState struct {
	// Sandbox's State is "running" or "broken" (an ended sandbox is gone:
	// 404).
	Sandbox
	Usage agentsandbox.Usage `json:"usage"`
}

// WipeReport is the answer to DELETE /v1/sandboxes/{id}: the wipe removed
// everything of the sandbox and verified it (a wipe that could not is a 500
// wipe_unverified listing what is left).
type WipeReport struct {
	Verified   bool    `json:"verified"`
	DurationMS float64 `json:"duration_ms"`
}

// SandboxList is the answer to GET /v1/sandboxes.
type SandboxList struct {
	Items []Sandbox `json:"items"`
}

// BrowserRequest is the `browser` of a create: true, or an object.
type BrowserRequest struct {
	// Start starts the browser at create (default: at the first
	// connection).
	Start bool `json:"start,omitempty"`
}

// BrowserOption is the `browser` field of a create: absent or false for
// none, true or a BrowserRequest for a browser sandbox.
type BrowserOption struct {
	// Set is true for a browser sandbox.
	Set bool
	BrowserRequest
}

// UnmarshalJSONFrom accepts true, false, null (none) or an object, decoded
// with the decoder's options (an unknown or repeated name in it is refused,
// as anywhere in a request).
func (b *BrowserOption) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	switch dec.PeekKind() {
	case 't', 'f', 'n':
		var set *bool
		if err := jsonv2.UnmarshalDecode(dec, &set); err != nil {
			return err
		}
		*b = BrowserOption{Set: set != nil && *set}
		return nil
	case '{':
		var r BrowserRequest
		if err := jsonv2.UnmarshalDecode(dec, &r); err != nil {
			return err
		}
		*b = BrowserOption{Set: true, BrowserRequest: r}
		return nil
	}
	if _, err := dec.ReadValue(); err != nil {
		return err
	}
	return errors.New(`give true, false or {"start": true}`)
}

// MarshalJSON writes false, true or the object.
func (b BrowserOption) MarshalJSON() ([]byte, error) {
	if !b.Set || !b.Start {
		return json.Marshal(b.Set)
	}
	return json.Marshal(b.BrowserRequest)
}

// BrowserVersion is the answer of GET …/browser/json/version, with
// Chromium's own field names.
type BrowserVersion = agentsandbox.BrowserVersion

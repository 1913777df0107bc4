package live

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// CredentialKind says what a credential is and who holds it.
type CredentialKind string

// The credential kinds and the readable prefix of their secrets.
const (
	KindServiceToken CredentialKind = "service_token" // ovs_, held by a service
	KindPersonToken  CredentialKind = "person_token"  // ovp_, held by a person
	KindDeskTicket   CredentialKind = "desk_ticket"   // ovd_, held by a person
	KindSession      CredentialKind = "session"       // ov_session cookie value, held by a person
	KindLoginTicket  CredentialKind = "login_ticket"  // ovl_, a one-time sign-in link, held by a person
)

// CredentialKinds returns every kind, in the order listings name them. The
// slice is the caller's own.
func CredentialKinds() []CredentialKind {
	return []CredentialKind{KindServiceToken, KindPersonToken, KindDeskTicket, KindSession, KindLoginTicket}
}

// LastUseGrain is how finely stores keep a credential's last use: a use
// within this long of the recorded one need not be written.
const LastUseGrain = time.Minute

// Prefix returns the readable prefix of secrets of kind k.
func (k CredentialKind) Prefix() string {
	switch k {
	case KindServiceToken:
		return "ovs_"
	case KindPersonToken:
		return "ovp_"
	case KindDeskTicket:
		return "ovd_"
	case KindSession:
		return "ovsess_"
	case KindLoginTicket:
		return "ovl_"
	}
	return ""
}

// Credential is a stored credential. Only the SHA-256 of the secret is kept.
type Credential struct {
	ID   string         `json:"id"`
	Kind CredentialKind `json:"kind"`
	// ServiceID is set for service tokens, PersonID for the other kinds.
	ServiceID string     `json:"service_id,omitempty"`
	PersonID  string     `json:"person_id,omitempty"`
	Hash      [32]byte   `json:"-"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// LastUsedAt is when the credential was last used (to LastUseGrain);
	// nil when never.
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	// HolderName is the name of the person or service holding it; set by
	// ListCredentials only.
	HolderName string `json:"holder_name,omitempty"`
}

// NeedsTouch reports whether a use of c at now should be recorded: it was
// never used, or its recorded use is LastUseGrain old.
func (c Credential) NeedsTouch(now time.Time) bool {
	return c.LastUsedAt == nil || now.Sub(*c.LastUsedAt) >= LastUseGrain
}

// Usable reports whether c is neither revoked nor expired at now.
func (c Credential) Usable(now time.Time) bool {
	return c.RevokedAt == nil && (c.ExpiresAt == nil || now.Before(*c.ExpiresAt))
}

// NewSecret returns a fresh random secret of kind k (its prefix followed by
// 43 base64url characters) and its hash. It fails only if the system's random
// source fails.
func NewSecret(k CredentialKind) (secret string, hash [32]byte, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", hash, fmt.Errorf("new secret: %w", err)
	}
	secret = k.Prefix() + base64.RawURLEncoding.EncodeToString(b[:])
	return secret, HashSecret(secret), nil
}

// HashSecret returns the SHA-256 of secret, the form in which it is stored.
func HashSecret(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// KindOfSecret returns the kind named by secret's prefix, and false when the
// prefix is none of them.
func KindOfSecret(secret string) (CredentialKind, bool) {
	for _, k := range CredentialKinds() {
		if strings.HasPrefix(secret, k.Prefix()) {
			return k, true
		}
	}
	return "", false
}

// NewID returns a random identifier with a readable prefix (e.g. "per_").
func NewID(prefix string) (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new id: %w", err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// secretLike matches what looks like one of Live's secrets: a kind's prefix
// and the characters of a secret.
var secretLike = regexp.MustCompile(`ov(s|p|d|sess|l)_[A-Za-z0-9_-]+`)

// RedactSecrets replaces anything in s that looks like one of Live's secrets
// with "[redacted]".
func RedactSecrets(s string) string {
	if !strings.Contains(s, "ov") { // every secret starts so; most text has none
		return s
	}
	return secretLike.ReplaceAllString(s, "[redacted]")
}

package workerapi

import "time"

// Bounds of a preview's time to live (PreviewRequest.TTLSeconds).
const (
	DefaultPreviewTTL = time.Hour
	MaxPreviewTTL     = 24 * time.Hour
)

// PreviewRequest is the body of POST /v1/sandboxes/{id}/ports/{port}/preview.
type PreviewRequest struct {
	// TTLSeconds is how long the preview URL opens the port: 1 up to
	// MaxPreviewTTL (zero or absent: DefaultPreviewTTL). The URL dies
	// sooner with its sandbox, or when the worker restarts.
	TTLSeconds int `json:"ttl_seconds,omitempty"`
}

// Preview is a signed, expiring URL that opens one port of one sandbox in
// a person's browser, on the worker's preview listener: the answer of POST
// …/ports/{port}/preview.
type Preview struct {
	// URL opens the preview: its origin with a token in the query, which
	// the first visit turns into a cookie of that origin.
	URL string `json:"url"`
	// Origin is the preview's own origin (one per sandbox and port).
	Origin    string    `json:"origin"`
	Port      int       `json:"port"`
	ExpiresAt time.Time `json:"expires_at"`
}

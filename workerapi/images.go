package workerapi

import "time"

// ImageRequest is the body of POST /v1/images.
type ImageRequest struct {
	// Image is the reference to pull (a tag is resolved again).
	Image string `json:"image"`
}

// Image describes an image of the worker's store.
type Image struct {
	Digest string   `json:"digest"`
	Refs   []string `json:"refs"`
	// Size is what its layers take unpacked, in bytes.
	Size     int64     `json:"size"`
	Layers   int       `json:"layers"`
	Platform string    `json:"platform"`
	Pulled   time.Time `json:"pulled"`
	LastUsed time.Time `json:"last_used"`
	// InUse is how many sandboxes run on it now.
	InUse int `json:"in_use"`
}

// ImageList is the answer to GET /v1/images.
type ImageList struct {
	Items []Image `json:"items"`
}

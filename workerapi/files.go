package workerapi

import "time"

// FileEntry is one entry of a directory listing.
type FileEntry struct {
	Name string `json:"name"`
	// Type is "file", "directory", "symlink" (described, not followed) or
	// "other" (a fifo, socket or device).
	Type string `json:"type"`
	Size int64  `json:"size"`
	// Mode is the permission bits in octal, e.g. "0644".
	Mode    string    `json:"mode"`
	ModTime time.Time `json:"mtime"`
}

// DirListing is the answer of GET …/files/{dir}/.
type DirListing struct {
	Items []FileEntry `json:"items"`
}

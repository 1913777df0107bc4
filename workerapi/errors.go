package workerapi

// The API's error codes; each is answered with one status (worker/httpapi's
// statusOf table). Clients match codes, never messages.
const (
	CodeInvalidRequest   = "invalid_request"
	CodeUnsupportedType  = "unsupported_media_type"
	CodeBodyTooLarge     = "body_too_large"
	CodeUnauthorized     = "unauthorized"
	CodeNoRoute          = "no_route"
	CodeMethod           = "method_not_allowed"
	CodeSandboxNotFound  = "sandbox_not_found"
	CodeNotFound         = "not_found"
	CodeFileNotFound     = "file_not_found"
	CodeProcessNotFound  = "process_not_found"
	CodeProcessExited    = "process_exited"
	CodeSandboxBroken    = "sandbox_broken"
	CodeIsDirectory      = "is_directory"
	CodeNotDirectory     = "not_directory"
	CodeExists           = "exists"
	CodeNotEmpty         = "not_empty"
	CodeInvalidArchive   = "invalid_archive"
	CodeAtCapacity       = "at_capacity"
	CodeNoBrowser        = "no_browser"
	CodeBrowserBusy      = "browser_busy"
	CodeWorkspaceFull    = "workspace_full"
	CodeWipeUnverified   = "wipe_unverified"
	CodeNoSelfTest       = "no_selftest"
	CodeLimits           = "limits_unavailable"
	CodeHostUnsupported  = "host_unsupported"
	CodeTooManyConns     = "too_many_connections"
	CodePortClosed       = "port_closed"
	CodePortFailed       = "port_failed"
	CodePortTimeout      = "port_timeout"
	CodePreviewForbidden = "preview_forbidden"
	CodeNoPreview        = "no_preview"
	CodeInternal         = "internal"

	// The image codes.
	CodeImageNotAllowed     = "image_not_allowed"
	CodeInvalidImage        = "invalid_image"
	CodeImageNotFound       = "image_not_found"
	CodeImageUnauthorized   = "image_unauthorized"
	CodeRegistryUnavailable = "registry_unavailable"
	CodeImageCacheFull      = "image_cache_full"
	CodeImageInUse          = "image_in_use"
	CodeImagesUnavailable   = "images_unavailable"
)

// Error is the error object of an answer (`{"error":{...}}`) and of a
// stream's last event: a stable code and a message for a person saying
// what to fix.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Leftovers lists what a wipe could not remove (code wipe_unverified).
	Leftovers []string `json:"leftovers,omitempty"`
}

// ErrorBody is the body of every error answer.
type ErrorBody struct {
	Error Error `json:"error"`
}

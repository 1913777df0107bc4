package httpapi

import "openvibe.network/agentsandbox/workerapi"

// The API's wire types, stated in workerapi (which the Go client imports
// too); the names here are the server's handles on them.
type (
	CreateRequest   = workerapi.CreateRequest
	PatchRequest    = workerapi.PatchRequest
	SandboxLimits   = workerapi.SandboxLimits
	Sandbox         = workerapi.Sandbox
	SandboxState    = workerapi.SandboxState
	SecretInfo      = workerapi.SecretInfo
	WipeReport      = workerapi.WipeReport
	SandboxList     = workerapi.SandboxList
	BrowserRequest  = workerapi.BrowserRequest
	BrowserOption   = workerapi.BrowserOption
	ExecRequest     = workerapi.ExecRequest
	ExecEvent       = workerapi.ExecEvent
	Process         = workerapi.Process
	ProcessList     = workerapi.ProcessList
	SignalRequest   = workerapi.SignalRequest
	StdinRequest    = workerapi.StdinRequest
	AttachMessage   = workerapi.AttachMessage
	FileEntry       = workerapi.FileEntry
	DirListing      = workerapi.DirListing
	Status          = workerapi.Status
	SelfTestSummary = workerapi.SelfTestSummary
	ImageRequest    = workerapi.ImageRequest
	Image           = workerapi.Image
	ImageList       = workerapi.ImageList
)

// The attach protocol's output tags (see workerapi).
const (
	AttachStdout = workerapi.AttachStdout
	AttachStderr = workerapi.AttachStderr
)

// The API's error codes (see workerapi), each with the one status statusOf
// answers it with.
const (
	CodeInvalidRequest   = workerapi.CodeInvalidRequest
	CodeUnsupportedType  = workerapi.CodeUnsupportedType
	CodeBodyTooLarge     = workerapi.CodeBodyTooLarge
	CodeUnauthorized     = workerapi.CodeUnauthorized
	CodeNoRoute          = workerapi.CodeNoRoute
	CodeMethod           = workerapi.CodeMethod
	CodeSandboxNotFound  = workerapi.CodeSandboxNotFound
	CodeNotFound         = workerapi.CodeNotFound
	CodeFileNotFound     = workerapi.CodeFileNotFound
	CodeProcessNotFound  = workerapi.CodeProcessNotFound
	CodeProcessExited    = workerapi.CodeProcessExited
	CodeSandboxBroken    = workerapi.CodeSandboxBroken
	CodeIsDirectory      = workerapi.CodeIsDirectory
	CodeNotDirectory     = workerapi.CodeNotDirectory
	CodeExists           = workerapi.CodeExists
	CodeNotEmpty         = workerapi.CodeNotEmpty
	CodeInvalidArchive   = workerapi.CodeInvalidArchive
	CodeAtCapacity       = workerapi.CodeAtCapacity
	CodeNoBrowser        = workerapi.CodeNoBrowser
	CodeBrowserBusy      = workerapi.CodeBrowserBusy
	CodeWorkspaceFull    = workerapi.CodeWorkspaceFull
	CodeWipeUnverified   = workerapi.CodeWipeUnverified
	CodeNoSelfTest       = workerapi.CodeNoSelfTest
	CodeTooManyConns     = workerapi.CodeTooManyConns
	CodePortClosed       = workerapi.CodePortClosed
	CodePortFailed       = workerapi.CodePortFailed
	CodePortTimeout      = workerapi.CodePortTimeout
	CodePreviewForbidden = workerapi.CodePreviewForbidden
	CodeNoPreview        = workerapi.CodeNoPreview
	CodeLimits           = workerapi.CodeLimits
	CodeHostUnsupported  = workerapi.CodeHostUnsupported
	CodeInternal         = workerapi.CodeInternal

	CodeImageNotAllowed     = workerapi.CodeImageNotAllowed
	CodeInvalidImage        = workerapi.CodeInvalidImage
	CodeImageNotFound       = workerapi.CodeImageNotFound
	CodeImageUnauthorized   = workerapi.CodeImageUnauthorized
	CodeRegistryUnavailable = workerapi.CodeRegistryUnavailable
	CodeImageCacheFull      = workerapi.CodeImageCacheFull
	CodeImageInUse          = workerapi.CodeImageInUse
	CodeImagesUnavailable   = workerapi.CodeImagesUnavailable
)

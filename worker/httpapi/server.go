// Package httpapi is the HTTP API a sandbox worker offers OpenVibe.Codes:
// create a sandbox with a time box and limits of its own, read its state and
// usage, extend its time box, run commands in it (their output streamed as
// NDJSON events as it arrives, or in the background with their output kept,
// signalled, fed stdin, attached over a WebSocket with a terminal), put and
// get workspace files, reach what it serves on its own ports (HTTP and
// WebSocket, see ports.go), delete (a verified wipe), list, status and an
// on-demand self-test; and, on a listener of their own (PreviewHandler),
// signed preview URLs of the sandboxes' ports for a person's browser.
//
// Every route needs the worker's bearer token (compared in constant time);
// errors are JSON `{"error":{"code","message"}}` saying what to fix. The API
// never blocks a sandbox on a slow client: see the exec handler for how its
// output is buffered, dropped and, for a client that stops reading, ended.
// docs/openapi.yaml describes the API; the client package is its Go client.
package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/sandbox/control"
)

// Runtime is what the API needs of a sandbox runtime; *sandbox.Runtime
// implements it. Its errors are the sandbox package's sentinels (wrapped or
// not), which the API maps to codes; any other error is a server fault.
type Runtime interface {
	Create(ctx context.Context, opts sandbox.Options) (sandbox.Info, error)
	Exec(ctx context.Context, id string, req agentsandbox.ExecRequest, stdout, stderr io.Writer) (agentsandbox.ExecResult, error)
	PutFile(ctx context.Context, id, path string, r io.Reader, mode fs.FileMode) error
	GetFile(ctx context.Context, id, path string, w io.Writer) error
	FileTree
	Delete(ctx context.Context, id string) (sandbox.WipeReport, error)
	List() []sandbox.Info
	Capacity() int
	Active() int
	Usage(id string) (agentsandbox.Usage, error)
	Extend(id string, total time.Duration) (sandbox.Info, error)
	UpdateSecrets(id string, secrets map[string]agentsandbox.Secret) (sandbox.Info, map[string]string, error)
	Processes
	Ports
}

// Processes is what the API needs of a runtime for the commands of a
// sandbox (see sandbox.Runtime's methods of the same names).
type Processes interface {
	Start(ctx context.Context, id string, req agentsandbox.ExecRequest) (sandbox.Process, error)
	Processes(ctx context.Context, id string) ([]sandbox.Process, error)
	Process(ctx context.Context, id string, pid int) (sandbox.Process, error)
	Output(ctx context.Context, id string, pid int, follow bool, fn func(sandbox.Output) error) (sandbox.Process, error)
	Signal(ctx context.Context, id string, pid int, sig string) error
	Stdin(ctx context.Context, id string, pid int, src io.Reader, closeAfter bool) error
	Attach(ctx context.Context, id string, pid int) (*sandbox.Attachment, error)
	StartBrowser(ctx context.Context, id string) (sandbox.Process, error)
	Browser(ctx context.Context, id string) (*sandbox.BrowserConn, error)
}

// Defaults of Config.
const (
	DefaultMaxBody      = 64 << 20
	DefaultStreamBuffer = 4 << 20
	DefaultWriteTimeout = 30 * time.Second
	DefaultMaxUpload    = 64 << 20
)

// Config configures a Server. Runtime and Token are required.
type Config struct {
	// Runtime runs the sandboxes.
	Runtime Runtime
	// Token is the bearer token every request must carry.
	Token string
	// Status, when set, supplies the last self-test for GET /v1/status;
	// Capacity and Active always come from Runtime. Nil: no self-test shown.
	Status func() Status
	// RunSelfTest, when set, runs a self-test for POST /v1/selftest; nil
	// makes that route answer 501.
	RunSelfTest func(ctx context.Context) (SelfTestSummary, error)
	// Browser says a headless browser works in this worker's sandboxes;
	// without it a create asking for one is refused with 400.
	Browser bool
	// Egress says the worker has an egress proxy: sandboxes get a way out
	// through it under their policy (without it, only mode none).
	Egress bool
	// EgressDefault is the policy of a create that gives none (zero: public
	// with a proxy, none without).
	EgressDefault agentsandbox.EgressPolicy
	// CheckEgress validates a create's policy and returns it in canonical
	// form; a *policy.Error is answered 400 with its message (the worker
	// wires its proxy's, which knows its ports and size limit). Nil:
	// policy.Compile with the default limits.
	CheckEgress func(agentsandbox.EgressPolicy) (agentsandbox.EgressPolicy, error)
	// Limits are the limits of a sandbox that asks for none, and the most
	// one may ask for (set every field: agentsandbox.Limits.WithDefaults).
	Limits agentsandbox.Limits
	// Logger gets one line per request (default: discard).
	Logger *slog.Logger
	// MaxBody bounds every JSON request body (default 64 MiB).
	MaxBody int64
	// MaxUpload bounds the body of a file or archive upload (default 64
	// MiB): one whose Content-Length is over is refused with 413 before
	// its body is read, one without is cut off with 413 as soon as it
	// passes the bound; either way nothing of it is written.
	MaxUpload int64
	// StreamBuffer bounds the bytes of command output held for one exec
	// stream while the client catches up (default 4 MiB); more is dropped.
	StreamBuffer int
	// BrowserMaxMessage bounds one CDP message from a browser's client
	// (default and at most control.MaxBrowserMessage, 64 MiB).
	BrowserMaxMessage int
	// WriteTimeout bounds each write of a response to the client (default
	// 30 s); an exec whose client stops reading that long is ended.
	WriteTimeout time.Duration
	// MCP, when set, serves the Model Context Protocol at /v1/mcp (behind
	// the same token; mcpserver.Server.Handler); nil answers 404 no_route
	// there.
	MCP http.Handler
	// Ports bounds the forwarding to the sandboxes' own ports and
	// configures previews (see ports.go).
	Ports PortsConfig
	// Images is the worker's image store; nil: images are off (a create
	// with one, and the /v1/images routes, are refused).
	Images Images
}

// Server serves the worker API. Make it with New.
type Server struct {
	cfg       Config
	tokenHash [sha256.Size]byte
	mux       *http.ServeMux
	ports     *portForwarder
}

// route is one registered endpoint; the OpenAPI test checks the document
// against this table.
type route struct {
	method, path string
	handler      func(*Server, http.ResponseWriter, *http.Request) error
}

var routes = []route{
	{http.MethodPost, "/v1/sandboxes", (*Server).create},
	{http.MethodGet, "/v1/sandboxes", (*Server).list},
	{http.MethodGet, "/v1/sandboxes/{id}", (*Server).get},
	{http.MethodPatch, "/v1/sandboxes/{id}", (*Server).patch},
	{http.MethodDelete, "/v1/sandboxes/{id}", (*Server).delete},
	{http.MethodPost, "/v1/sandboxes/{id}/exec", (*Server).exec},
	{http.MethodGet, "/v1/sandboxes/{id}/processes", (*Server).processes},
	{http.MethodGet, "/v1/sandboxes/{id}/processes/{pid}", (*Server).process},
	{http.MethodGet, "/v1/sandboxes/{id}/processes/{pid}/output", (*Server).output},
	{http.MethodPost, "/v1/sandboxes/{id}/processes/{pid}/signal", (*Server).signal},
	{http.MethodPost, "/v1/sandboxes/{id}/processes/{pid}/stdin", (*Server).stdin},
	{http.MethodGet, "/v1/sandboxes/{id}/processes/{pid}/attach", (*Server).attach},
	{http.MethodGet, "/v1/sandboxes/{id}/browser", (*Server).browser},
	{http.MethodGet, "/v1/sandboxes/{id}/browser/json/version", (*Server).browserVersion},
	{http.MethodPut, "/v1/sandboxes/{id}/files/{path...}", (*Server).putFile},
	{http.MethodGet, "/v1/sandboxes/{id}/files/{path...}", (*Server).getFile},
	{http.MethodDelete, "/v1/sandboxes/{id}/files/{path...}", (*Server).deleteFile},
	{http.MethodGet, "/v1/sandboxes/{id}/archive/{path...}", (*Server).getArchive},
	{http.MethodPut, "/v1/sandboxes/{id}/archive/{path...}", (*Server).putArchive},
	// The workspace's own, without the trailing slash (else the mux would
	// answer a bare redirect to it): an empty path.
	{http.MethodPut, "/v1/sandboxes/{id}/files", (*Server).putFile},
	{http.MethodGet, "/v1/sandboxes/{id}/files", (*Server).getFile},
	{http.MethodDelete, "/v1/sandboxes/{id}/files", (*Server).deleteFile},
	{http.MethodGet, "/v1/sandboxes/{id}/archive", (*Server).getArchive},
	{http.MethodPut, "/v1/sandboxes/{id}/archive", (*Server).putArchive},
	{http.MethodPost, previewRoute, (*Server).previewCreate},
	{http.MethodGet, portRoute, (*Server).portForward},
	{http.MethodHead, portRoute, (*Server).portForward},
	{http.MethodPost, portRoute, (*Server).portForward},
	{http.MethodPut, portRoute, (*Server).portForward},
	{http.MethodPatch, portRoute, (*Server).portForward},
	{http.MethodDelete, portRoute, (*Server).portForward},
	{http.MethodOptions, portRoute, (*Server).portForward},
	{http.MethodPost, "/v1/images", (*Server).pullImage},
	{http.MethodGet, "/v1/images", (*Server).listImages},
	{http.MethodDelete, "/v1/images/{digest}", (*Server).deleteImage},
	{http.MethodGet, "/v1/status", (*Server).status},
	{http.MethodPost, "/v1/mcp", (*Server).mcp},
	{http.MethodGet, "/v1/mcp", (*Server).mcp},
	{http.MethodDelete, "/v1/mcp", (*Server).mcp},
	{http.MethodPost, "/v1/selftest", (*Server).selfTest},
}

// New checks cfg, fills its defaults and returns a Server. It fails when
// Runtime or Token is missing.
func New(cfg Config) (*Server, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("new worker api: no runtime")
	}
	if strings.TrimSpace(cfg.Token) == "" {
		return nil, errors.New("new worker api: no bearer token")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxUpload <= 0 {
		cfg.MaxUpload = DefaultMaxUpload
	}
	if cfg.StreamBuffer <= 0 {
		cfg.StreamBuffer = DefaultStreamBuffer
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.BrowserMaxMessage <= 0 || cfg.BrowserMaxMessage > control.MaxBrowserMessage {
		cfg.BrowserMaxMessage = control.MaxBrowserMessage
	}
	ports, err := newPortForwarder(cfg.Ports, cfg.Runtime, cfg.WriteTimeout)
	if err != nil {
		return nil, fmt.Errorf("new worker api: %w", err)
	}
	s := &Server{cfg: cfg, tokenHash: sha256.Sum256([]byte(cfg.Token)), mux: http.NewServeMux(), ports: ports}
	for _, rt := range routes {
		s.mux.Handle(rt.method+" "+rt.path, s.endpoint(rt.handler))
	}
	allowed := map[string][]string{}
	for _, rt := range routes {
		allowed[rt.path] = append(allowed[rt.path], rt.method)
	}
	for p, methods := range allowed {
		if p == previewRoute { // the port route takes its other methods
			continue
		}
		s.mux.Handle(p, methodNotAllowed(methods))
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, &Error{Status: statusOf(CodeNoRoute), Code: CodeNoRoute, Message: "no such endpoint; see docs/openapi.yaml"})
	})
	return s, nil
}

// methodNotAllowed answers a known path asked with another method.
func methodNotAllowed(methods []string) http.Handler {
	allow := strings.Join(methods, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, &Error{Status: statusOf(CodeMethod), Code: CodeMethod,
			Message: r.Method + " is not allowed here; use " + allow})
	})
}

// Handler returns the API's handler: logging, then authentication, then the
// routes.
func (s *Server) Handler() http.Handler {
	return s.logRequests(s.authenticate(refuseDotSegments(s.mux)))
}

// refuseDotSegments answers 400 for a path with ".", ".." or empty segments,
// which the mux would otherwise redirect to another path (perhaps another
// sandbox's file).
func refuseDotSegments(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		segs := strings.Split(r.URL.Path, "/")
		for i, seg := range segs[1:] {
			if seg == "." || seg == ".." || (seg == "" && i < len(segs)-2) {
				writeError(w, badRequest("the URL path %q contains `.`, `..` or an empty segment; paths must stay inside the workspace", r.URL.Path))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// bearer returns the token of an `Authorization: Bearer TOKEN` header (the
// scheme in any case), or false.
func bearer(h string) (string, bool) {
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	return h[len(scheme):], true
}

// authenticate answers 401 unless the request carries the bearer token.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r.Header.Get("Authorization"))
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], s.tokenHash[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="codes-sandbox"`)
			writeError(w, &Error{Status: statusOf(CodeUnauthorized), Code: CodeUnauthorized,
				Message: "send the worker's API token as `Authorization: Bearer TOKEN`"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// endpoint adapts a handler that returns an error: an error before anything
// was written becomes the JSON error answer; after, the connection is cut so
// the client cannot take a partial answer for a whole one.
func (s *Server) endpoint(h func(*Server, http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lw, _ := w.(*logWriter)
		err := h(s, w, r)
		if err == nil {
			return
		}
		apiErr := toError(err)
		if apiErr.Status >= 500 { // the details stay in the log
			addLog(r.Context(), slog.String("err", err.Error()))
		}
		if lw != nil && lw.wrote {
			panic(http.ErrAbortHandler)
		}
		writeError(w, apiErr)
	})
}

// mcp hands /v1/mcp to Config.MCP, the Streamable HTTP transport of the MCP
// server.
func (s *Server) mcp(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.MCP == nil {
		return &Error{Status: statusOf(CodeNoRoute), Code: CodeNoRoute, Message: "this worker serves no MCP endpoint"}
	}
	s.cfg.MCP.ServeHTTP(w, r)
	return nil
}

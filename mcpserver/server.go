// Package mcpserver is the worker's Model Context Protocol server: tools an
// agent calls to create a sandbox (on an OCI image if it names one), run
// commands in it (bounded output, a note where it was cut), start
// background processes and read their output, move files and archives,
// open a server of it in a person's browser (a preview URL), extend and
// delete it, and drive its browser (navigate, screenshot as an image, page
// text). The tools act
// through the worker API's Go client, so every call carries the worker's
// token and meets its limits.
//
// A sandbox belongs to the MCP session that created it: the session's
// tools see only its own sandboxes, and they are wiped when the session
// ends or times out. The server therefore speaks the protocol versions
// that have sessions (through 2025-11-25); a client that asks for the
// session-less 2026-07-28 falls back to them, as the specification says.
//
// The worker serves it over Streamable HTTP at /v1/mcp (Handler);
// `codes-sandbox mcp` serves it over stdio (RunStdio).
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/internal/buildinfo"
)

// DefaultSessionTimeout is how long an HTTP session may stay idle before it
// is closed and its sandboxes wiped.
const DefaultSessionTimeout = 10 * time.Minute

// wipeTimeout bounds the deletes of an ended session's sandboxes.
const wipeTimeout = 2 * time.Minute

// Config configures a Server. Worker is required.
type Config struct {
	// Worker is the API the tools call.
	Worker *client.Worker
	// Logger gets a line per session's end and per wipe (default: discard).
	Logger *slog.Logger
	// SessionTimeout closes an idle HTTP session (default DefaultSessionTimeout).
	SessionTimeout time.Duration
}

// Server holds the tools and which session owns which sandbox. Make it
// with New; it is safe for concurrent use.
type Server struct {
	cfg Config
	mcp *mcp.Server

	mu     sync.Mutex
	owned  map[*mcp.ServerSession][]string // sandbox ids, in creation order
	wipes  sync.WaitGroup
	closed bool
}

// New returns a Server over cfg.Worker.
func New(cfg Config) (*Server, error) {
	if cfg.Worker == nil {
		return nil, errors.New("new mcp server: no worker client")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	s := &Server{cfg: cfg, owned: map[*mcp.ServerSession][]string{}}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "codes-sandbox", Title: "agentsandbox worker", Version: buildinfo.Read().Version},
		&mcp.ServerOptions{
			Instructions: "Run code in isolated, time-boxed Linux sandboxes. Call create_sandbox first; " +
				"the sandboxes you create belong to this session and are wiped when it ends.",
			Capabilities:              &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
			SupportedProtocolVersions: sessionVersions(),
		})
	s.addTools()
	return s, nil
}

// sessionVersions are the protocol versions the SDK speaks that have
// sessions (older than the session-less 2026-07-28).
func sessionVersions() []string {
	return slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool { return v >= "2026-07-28" })
}

// Handler is the Streamable HTTP endpoint (mount it behind the worker's
// authentication).
func (s *Server) Handler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{SessionTimeout: s.cfg.SessionTimeout, Logger: s.cfg.Logger})
}

// RunStdio serves one session over in and out (a local agent host's pipes
// to `codes-sandbox mcp`) until the client closes it or ctx ends; then its
// sandboxes are wiped.
func (s *Server) RunStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	err := s.mcp.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopCloser{out}})
	s.Close()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcp over stdio: %w", err)
	}
	return nil
}

// nopCloser is a Writer with a Close that does nothing (the caller owns it).
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Close wipes every session's sandboxes and waits for the wipes.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	sessions := make([]*mcp.ServerSession, 0, len(s.owned))
	for ss := range s.owned {
		sessions = append(sessions, ss)
	}
	s.mu.Unlock()
	for _, ss := range sessions {
		s.wipe(ss)
	}
	s.wipes.Wait()
}

// own records that session ss created sandbox id; the first sandbox of a
// session starts the watch that wipes them at its end.
func (s *Server) own(ss *mcp.ServerSession, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("the MCP server is shutting down")
	}
	ids, known := s.owned[ss]
	s.owned[ss] = append(ids, id)
	if !known && ss != nil {
		s.wipes.Add(1)
		go func() {
			defer s.wipes.Done()
			_ = ss.Wait()
			s.wipe(ss)
		}()
	}
	return nil
}

// owns reports whether session ss created sandbox id.
func (s *Server) owns(ss *mcp.ServerSession, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.owned[ss], id)
}

// disown forgets sandbox id of session ss (it was deleted).
func (s *Server) disown(ss *mcp.ServerSession, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owned[ss] = slices.DeleteFunc(s.owned[ss], func(x string) bool { return x == id })
}

// wipe deletes every sandbox session ss still owns.
func (s *Server) wipe(ss *mcp.ServerSession) {
	s.mu.Lock()
	ids := s.owned[ss]
	delete(s.owned, ss)
	s.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), wipeTimeout)
	defer cancel()
	for _, id := range ids {
		rep, err := s.cfg.Worker.Delete(ctx, id)
		switch {
		case errors.Is(err, client.ErrSandboxNotFound): // its time box ended first
		case err != nil:
			s.cfg.Logger.Warn("mcp session ended: wipe failed", "sandbox", id, "err", err.Error())
		default:
			s.cfg.Logger.Info("mcp session ended: sandbox wiped", "sandbox", id, "verified", rep.Verified)
		}
	}
}

// sandbox is the handle of id when session ss owns it.
func (s *Server) sandbox(ss *mcp.ServerSession, id string) (*client.Sandbox, error) {
	if id == "" {
		return nil, errors.New("give sandbox_id, as create_sandbox answered it")
	}
	if !s.owns(ss, id) {
		return nil, fmt.Errorf("sandbox %q was not created in this MCP session (or was deleted); create one with create_sandbox", id)
	}
	return s.cfg.Worker.Sandbox(id), nil
}

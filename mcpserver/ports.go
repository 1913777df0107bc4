package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// PreviewInput is preview_port's input.
type PreviewInput struct {
	SandboxID  string `json:"sandbox_id" jsonschema:"the sandbox, as create_sandbox answered it"`
	Port       int    `json:"port" jsonschema:"the port the sandbox's server listens on (on 127.0.0.1 or 0.0.0.0 inside the sandbox), 1 to 65535"`
	TTLSeconds int    `json:"ttl_seconds,omitempty" jsonschema:"how long the URL opens the port, 1 to 86400 seconds (default 3600)"`
}

// PreviewOutput is a URL that opens one port of one sandbox in a browser.
type PreviewOutput struct {
	URL       string    `json:"url" jsonschema:"open this in a browser; it sets a cookie for its origin and leads to the server's /"`
	Origin    string    `json:"origin" jsonschema:"the origin the server is seen at (its pages' links and requests stay on it)"`
	Port      int       `json:"port"`
	ExpiresAt time.Time `json:"expires_at"`
}

func (s *Server) previewPort(ctx context.Context, ss *mcp.ServerSession, in PreviewInput) (PreviewOutput, error) {
	sb, err := s.sandbox(ss, in.SandboxID)
	if err != nil {
		return PreviewOutput{}, err
	}
	// The worker checks the port and the ttl, and says what to fix.
	p, err := sb.Preview(ctx, in.Port, time.Duration(in.TTLSeconds)*time.Second)
	if err != nil {
		return PreviewOutput{}, err
	}
	return PreviewOutput{URL: p.URL, Origin: p.Origin, Port: p.Port, ExpiresAt: p.ExpiresAt}, nil
}

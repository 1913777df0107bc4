package mcpserver

import (
	"context"
	"fmt"
	"time"

	"github.com/gorilla/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"openvibe.network/agentsandbox/internal/cdp"
)

// browserTimeout bounds one browser tool (Chromium's start included).
const browserTimeout = 90 * time.Second

// NavigateInput is browser_navigate's input.
type NavigateInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"a sandbox created with browser: true"`
	URL       string `json:"url" jsonschema:"the page to load, e.g. http://127.0.0.1:8000/ for a server the sandbox runs"`
}

// PageTextOutput is a page's text.
type PageTextOutput struct {
	URL   string `json:"url"`
	Title string `json:"title"`
	Text  string `json:"text"`
}

func (s *Server) addBrowserTools() {
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "browser_navigate", Description: "Load a URL in the sandbox's headless Chromium " +
		"(it reaches what the sandbox serves on 127.0.0.1, and the network as the sandbox's egress allows) and answer a screenshot of the page."},
		func(ctx context.Context, req *mcp.CallToolRequest, in NavigateInput) (*mcp.CallToolResult, any, error) {
			return s.withPage(ctx, req.Session, in.SandboxID, func(p *cdp.Page) (*mcp.CallToolResult, error) {
				if errText, err := p.Navigate(in.URL); err != nil {
					return nil, err
				} else if errText != "" {
					return nil, fmt.Errorf("loading %s failed: %s", in.URL, errText)
				}
				if _, err := pageText(p); err != nil { // waits for the load
					return nil, err
				}
				return screenshot(p)
			})
		})
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "browser_screenshot", Description: "A PNG screenshot of the page the sandbox's browser shows."},
		func(ctx context.Context, req *mcp.CallToolRequest, in SandboxInput) (*mcp.CallToolResult, any, error) {
			return s.withPage(ctx, req.Session, in.SandboxID, screenshot)
		})
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "browser_page_text", Description: "The URL, title and visible text of the page the sandbox's browser shows."},
		func(ctx context.Context, req *mcp.CallToolRequest, in SandboxInput) (*mcp.CallToolResult, PageTextOutput, error) {
			var out PageTextOutput
			_, _, err := s.withPage(ctx, req.Session, in.SandboxID, func(p *cdp.Page) (*mcp.CallToolResult, error) {
				var err error
				out, err = pageText(p)
				return nil, err
			})
			return nil, out, err
		})
}

// withPage connects to the sandbox's browser, attaches to its page (making
// one when it has none) and calls fn; the connection closes after, the
// page stays for the next tool.
func (s *Server) withPage(ctx context.Context, ss *mcp.ServerSession, id string, fn func(*cdp.Page) (*mcp.CallToolResult, error)) (*mcp.CallToolResult, any, error) {
	sb, err := s.sandbox(ss, id)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, browserTimeout)
	defer cancel()
	if _, err := sb.BrowserVersion(ctx); err != nil { // says why (no browser, busy) as the API does
		return nil, nil, err
	}
	conn, err := sb.DialBrowser(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	c := cdp.New(wsTransport{conn})
	p, err := c.FirstPage()
	if err != nil {
		return nil, nil, err
	}
	res, err := fn(p)
	return res, nil, err
}

// pageText is the page's URL, title and text, once it loaded.
func pageText(p *cdp.Page) (PageTextOutput, error) {
	var out PageTextOutput
	text, err := p.Text()
	if err != nil {
		return out, err
	}
	var meta struct {
		URL   string `json:"url"`
		Title string `json:"title"`
	}
	if err := p.Eval(`({url: location.href, title: document.title})`, &meta); err != nil {
		return out, err
	}
	return PageTextOutput{URL: meta.URL, Title: meta.Title, Text: text}, nil
}

// screenshot is the page as a PNG image content block.
func screenshot(p *cdp.Page) (*mcp.CallToolResult, error) {
	png, err := p.Screenshot()
	if err != nil {
		return nil, err
	}
	meta, _ := pageText(p)
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.ImageContent{Data: png, MIMEType: "image/png"},
		&mcp.TextContent{Text: fmt.Sprintf("%s — %s", meta.URL, meta.Title)},
	}}, nil
}

// wsTransport carries CDP messages over the browser's WebSocket.
type wsTransport struct{ c *websocket.Conn }

func (t wsTransport) Send(msg []byte) error { return t.c.WriteMessage(websocket.TextMessage, msg) }

func (t wsTransport) Next() ([]byte, error) {
	_, m, err := t.c.ReadMessage()
	return m, err
}

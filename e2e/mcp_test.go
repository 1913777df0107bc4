package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/sandbox/control"
)

// mcpTools are the tools the worker's MCP server lists.
var mcpTools = []string{"browser_navigate", "browser_page_text", "browser_screenshot", "create_sandbox", "delete_sandbox",
	"download_archive", "extend_sandbox", "list_files", "preview_port", "read_file", "read_output", "run_command", "start_process",
	"upload_archive", "write_file"}

// startPlainWorker runs `codes-sandbox serve` without Live (its browser on
// when Chromium is installed) and returns its API URL and token file.
func startPlainWorker(t *testing.T) (api, tokenFile string) {
	t.Helper()
	bin := binaries(t)
	dir := t.TempDir()
	tokenFile = filepath.Join(dir, "api.token")
	if err := os.WriteFile(tokenFile, []byte("e2e-api-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	browser := "off"
	if sandbox.FindBrowser() != "" {
		browser = "on"
	}
	p := start(t, filepath.Join(bin, "codes-sandbox"), "serve", "--listen", "127.0.0.1:0", "--addr-file", filepath.Join(dir, "addr"),
		"--api-token-file", tokenFile, "--capacity", "2", "--overcommit", "--browser", browser)
	return p.addr(t, filepath.Join(dir, "addr")), tokenFile
}

// bearer adds the worker's token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// call calls a tool and decodes its structured output into out (when not
// nil); it fails the test on a protocol error, and returns the result.
func call(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	if out != nil {
		if res.IsError {
			t.Fatalf("call %s: tool error %s", name, text(res))
		}
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("call %s: %s: %v", name, b, err)
		}
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// exerciseMCP lists the tools and runs commands in a real sandbox through
// cs; it returns the sandbox's id (owned by the session).
func exerciseMCP(ctx context.Context, t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" || tl.InputSchema == nil {
			t.Errorf("tool %s has no description or input schema", tl.Name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, mcpTools) {
		t.Fatalf("tools %v, want %v", names, mcpTools)
	}
	var sb struct {
		SandboxID string `json:"sandbox_id"`
	}
	call(ctx, t, cs, "create_sandbox", map[string]any{"time_box_minutes": 10, "egress": "none"}, &sb)
	var run struct {
		ExitCode  int    `json:"exit_code"`
		Stdout    string `json:"stdout"`
		Stderr    string `json:"stderr"`
		StdoutCut int64  `json:"stdout_cut_bytes"`
	}
	call(ctx, t, cs, "run_command", map[string]any{"sandbox_id": sb.SandboxID, "command": "echo hello from MCP; echo oops >&2; exit 3"}, &run)
	if run.ExitCode != 3 || run.Stdout != "hello from MCP\n" || run.Stderr != "oops\n" {
		t.Fatalf("run_command: %+v", run)
	}
	call(ctx, t, cs, "run_command", map[string]any{"sandbox_id": sb.SandboxID, "argv": []string{"seq", "1", "100000"}, "max_output_bytes": 100}, &run)
	if run.StdoutCut == 0 || !strings.HasPrefix(run.Stdout, "1\n2\n") || !strings.HasSuffix(run.Stdout, "100000\n") || !strings.Contains(run.Stdout, "bytes cut here") {
		t.Fatalf("a long output is not cut with a note: %+v", run)
	}
	// Errors are tool errors with the API's message, not protocol failures.
	if res := call(ctx, t, cs, "run_command", map[string]any{"sandbox_id": sb.SandboxID, "command": "true", "cwd": "no/such/dir"}, nil); !res.IsError || !strings.Contains(text(res), "no/such/dir") {
		t.Fatalf("a bad cwd: %+v %s", res, text(res))
	}
	if res := call(ctx, t, cs, "run_command", map[string]any{"sandbox_id": "someone-elses", "command": "true"}, nil); !res.IsError || !strings.Contains(text(res), "not created in this MCP session") {
		t.Fatalf("another session's sandbox: %s", text(res))
	}
	// This worker has no --image-registry and no --preview-listen: the
	// image and the preview are tool errors that say what to fix.
	if res := call(ctx, t, cs, "create_sandbox", map[string]any{"image": "registry.example/team/py:3.12"}, nil); !res.IsError || !strings.Contains(text(res), "image_not_allowed") || !strings.Contains(text(res), "--image-registry") {
		t.Fatalf("an image on a worker without images: %s", text(res))
	}
	if res := call(ctx, t, cs, "preview_port", map[string]any{"sandbox_id": sb.SandboxID, "port": 8000}, nil); !res.IsError || !strings.Contains(text(res), "no_preview") {
		t.Fatalf("a preview on a worker without previews: %s", text(res))
	}
	call(ctx, t, cs, "write_file", map[string]any{"sandbox_id": sb.SandboxID, "path": "src/a.txt", "content": "alpha"}, &struct{}{})
	var file struct {
		Content string `json:"content"`
	}
	call(ctx, t, cs, "read_file", map[string]any{"sandbox_id": sb.SandboxID, "path": "src/a.txt"}, &file)
	var list struct {
		Entries []struct{ Name string } `json:"entries"`
	}
	call(ctx, t, cs, "list_files", map[string]any{"sandbox_id": sb.SandboxID, "path": "src"}, &list)
	if file.Content != "alpha" || len(list.Entries) != 1 || list.Entries[0].Name != "a.txt" {
		t.Fatalf("files: %+v %+v", file, list)
	}
	var arch struct {
		ArchiveBase64 string `json:"archive_base64"`
	}
	call(ctx, t, cs, "download_archive", map[string]any{"sandbox_id": sb.SandboxID, "path": "src"}, &arch)
	call(ctx, t, cs, "upload_archive", map[string]any{"sandbox_id": sb.SandboxID, "path": "copy", "archive_base64": arch.ArchiveBase64}, &struct{}{})
	call(ctx, t, cs, "run_command", map[string]any{"sandbox_id": sb.SandboxID, "command": "cat copy/a.txt"}, &run)
	if run.Stdout != "alpha" {
		t.Fatalf("the archive round trip: %+v", run)
	}
	var proc struct {
		Pid int `json:"pid"`
	}
	call(ctx, t, cs, "start_process", map[string]any{"sandbox_id": sb.SandboxID, "command": "echo started; sleep 0.2; echo done"}, &proc)
	var out struct {
		State    string `json:"state"`
		ExitCode *int   `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}
	waitFor(t, "the background process to exit", func() bool {
		call(ctx, t, cs, "read_output", map[string]any{"sandbox_id": sb.SandboxID, "pid": proc.Pid}, &out)
		return out.State == "exited"
	}, nil)
	if out.Stdout != "started\ndone\n" || out.ExitCode == nil || *out.ExitCode != 0 {
		t.Fatalf("read_output: %+v", out)
	}
	var ext struct {
		TimeBoxMinutes int `json:"time_box_minutes"`
	}
	call(ctx, t, cs, "extend_sandbox", map[string]any{"sandbox_id": sb.SandboxID, "time_box_minutes": 15}, &ext)
	if ext.TimeBoxMinutes != 15 {
		t.Fatalf("extend_sandbox: %+v", ext)
	}
	return sb.SandboxID
}

// waitGone waits until the worker no longer has sandbox id.
func waitGone(t *testing.T, wc *client.Worker, id string) {
	t.Helper()
	waitFor(t, "the session's sandbox to be wiped", func() bool {
		list, err := wc.List(context.Background())
		return err == nil && !slices.ContainsFunc(list, func(s client.SandboxInfo) bool { return s.ID == id })
	}, nil)
}

// TestMCPStreamableHTTP drives the worker's /v1/mcp with the official Go
// SDK's client: the tools, a command in a real sandbox, tool errors, and the
// session's sandbox wiped when the session ends.
func TestMCPStreamableHTTP(t *testing.T) {
	api, _ := startPlainWorker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*wait)
	defer cancel()
	wc := client.NewWorker(api, "e2e-api-token", nil)

	anon, err := http.Post(api+"/v1/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	anon.Body.Close()
	if anon.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/v1/mcp without the token: %d, want 401", anon.StatusCode)
	}

	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: api + "/v1/mcp", HTTPClient: &http.Client{Transport: bearer{"e2e-api-token"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := exerciseMCP(ctx, t, cs)
	if sandbox.FindBrowser() != "" {
		browseMCP(ctx, t, cs)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, wc, id)
}

// browseMCP drives a browser sandbox's page through the tools.
func browseMCP(ctx context.Context, t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	var sb struct {
		SandboxID string `json:"sandbox_id"`
	}
	call(ctx, t, cs, "create_sandbox", map[string]any{"browser": true, "memory_mb": 1024}, &sb)
	call(ctx, t, cs, "start_process", map[string]any{"sandbox_id": sb.SandboxID,
		"argv": []string{control.InitPath, control.ServeMarker, "127.0.0.1:8000", "hello, MCP"}}, &struct{}{})
	var res *mcp.CallToolResult
	waitFor(t, "the page to load", func() bool {
		res = call(ctx, t, cs, "browser_navigate", map[string]any{"sandbox_id": sb.SandboxID, "url": "http://127.0.0.1:8000/"}, nil)
		return !res.IsError
	}, nil)
	img, ok := res.Content[0].(*mcp.ImageContent)
	if !ok || img.MIMEType != "image/png" || len(img.Data) < 1000 || string(img.Data[1:4]) != "PNG" {
		t.Fatalf("browser_navigate did not answer a PNG: %+v", res.Content)
	}
	var page struct {
		Text string `json:"text"`
	}
	call(ctx, t, cs, "browser_page_text", map[string]any{"sandbox_id": sb.SandboxID}, &page)
	if !strings.Contains(page.Text, "hello, MCP") {
		t.Fatalf("browser_page_text: %+v", page)
	}
	call(ctx, t, cs, "delete_sandbox", map[string]any{"sandbox_id": sb.SandboxID}, &struct{}{})
}

// TestMCPStdio drives `codes-sandbox mcp` with the official Go SDK's client
// over stdio: the tools, a command in a real sandbox, and the session's
// sandbox wiped when stdin closes.
func TestMCPStdio(t *testing.T) {
	api, tokenFile := startPlainWorker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*wait)
	defer cancel()
	cmd := exec.Command(filepath.Join(binaries(t), "codes-sandbox"), "mcp", "--worker", api, "--api-token-file", tokenFile)
	cmd.Stderr = os.Stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := exerciseMCP(ctx, t, cs)
	if err := cs.Close(); err != nil {
		t.Fatalf("close the session: %v", err)
	}
	waitGone(t, client.NewWorker(api, "e2e-api-token", nil), id)
}

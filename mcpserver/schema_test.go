package mcpserver

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"openvibe.network/agentsandbox/client"
)

// TestToolSchemas: what the tools offer an agent, as a client lists it (in
// memory; no tool is called, so the worker's URL is never dialled): each
// tool's input properties and the ones it requires.
func TestToolSchemas(t *testing.T) {
	srv, err := New(Config{Worker: client.NewWorker("http://127.0.0.1:1", "unused", nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.mcp.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	type shape struct{ Props, Required []string }
	got := map[string]shape{}
	for _, tl := range res.Tools {
		var s struct {
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		}
		b, _ := json.Marshal(tl.InputSchema)
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %s: %v", tl.Name, b, err)
		}
		var sh shape
		for p := range s.Properties {
			sh.Props = append(sh.Props, p)
		}
		slices.Sort(sh.Props)
		slices.Sort(s.Required)
		sh.Required = s.Required
		got[tl.Name] = sh
	}
	for name, want := range map[string]shape{
		"create_sandbox": {Props: []string{"allow", "browser", "cpu_percent", "disk_mb", "egress", "image", "memory_mb", "pids", "time_box_minutes"}},
		"preview_port":   {Props: []string{"port", "sandbox_id", "ttl_seconds"}, Required: []string{"port", "sandbox_id"}},
	} {
		if g := got[name]; !slices.Equal(g.Props, want.Props) || !slices.Equal(g.Required, want.Required) {
			t.Errorf("%s: got %+v, want %+v", name, g, want)
		}
	}
}

package client_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/worker/httpapi"
	"openvibe.network/agentsandbox/worker/httpapi/apitest"
)

// TestPorts: PortURL with PortHeader reaches a port of the sandbox (the
// fake's stands in); Preview answers a URL of the sandbox-port's origin
// that expires after the ttl asked, or ErrNoPreview on a worker without
// previews.
func TestPorts(t *testing.T) {
	fake := apitest.NewFake(1)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Path+" token:"+r.Header.Get("Authorization"))
	}))
	defer app.Close()
	w := newWorker(t, fake, func(c *httpapi.Config) { c.Ports.PreviewBaseURL = "https://{port}-{id}.preview.example" })
	ctx := ctxT(t)
	info, err := w.Create(ctx, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fake.ServePort(info.ID, 8000, app.Listener.Addr().String())
	sb := w.Sandbox(info.ID)
	if !strings.HasSuffix(sb.PortURL(8000), "/v1/sandboxes/"+info.ID+"/ports/8000/") {
		t.Fatalf("PortURL %q", sb.PortURL(8000))
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", sb.PortURL(8000)+"a/b", nil)
	req.Header = w.PortHeader()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "/a/b token:" {
		t.Fatalf("through PortURL: %d %q", resp.StatusCode, body)
	}

	before := time.Now()
	p, err := sb.Preview(ctx, 8000, 90*time.Second+time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if p.Origin != "https://8000-"+info.ID+".preview.example" || !strings.HasPrefix(p.URL, p.Origin+"/?sandbox_preview_token=") || p.Port != 8000 ||
		p.ExpiresAt.Before(before.Add(90*time.Second)) || p.ExpiresAt.After(time.Now().Add(92*time.Second)) {
		t.Fatalf("Preview %+v", p)
	}
	if _, err := sb.Preview(ctx, 8000, 48*time.Hour); !errors.Is(err, client.ErrInvalidRequest) {
		t.Fatalf("Preview for two days: %v, want ErrInvalidRequest", err)
	}

	plain := newWorker(t, fake, nil)
	if _, err := plain.Sandbox(info.ID).Preview(ctx, 8000, 0); !errors.Is(err, client.ErrNoPreview) {
		t.Fatalf("Preview on a worker without previews: %v, want ErrNoPreview", err)
	}
}

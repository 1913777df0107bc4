package memlisten

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
)

// TestHTTP: an http.Server on the listener answers a client that dials it;
// after Close, Dial fails.
func TestHTTP(t *testing.T) {
	l := New()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello "+r.URL.Path)
	})}
	go func() { _ = srv.Serve(l) }()
	c := &http.Client{Transport: &http.Transport{DialContext: l.DialContext}}
	for range 3 { // kept alive and reused
		resp, err := c.Get("http://mem/x")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "hello /x" {
			t.Fatalf("answer %q", b)
		}
	}
	srv.Close()
	if _, err := l.DialContext(context.Background(), "tcp", "mem"); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("dial after close: %v, want net.ErrClosed", err)
	}
}

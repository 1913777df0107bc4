package client_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"openvibe.network/agentsandbox/client"
)

// TestCreateOptionsBrowser: `browser` is left out, true, or {"start":true}.
func TestCreateOptionsBrowser(t *testing.T) {
	tests := []struct {
		name string
		in   client.CreateOptions
		want string
	}{
		{"None", client.CreateOptions{TimeBoxMinutes: 5}, `{"time_box_minutes":5}`},
		{"Browser", client.CreateOptions{Browser: true}, `{"browser":true}`},
		{"Start", client.CreateOptions{Browser: true, StartBrowser: true}, `{"browser":{"start":true}}`},
		{"StartWithoutBrowser", client.CreateOptions{StartBrowser: true}, `{}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.in)
			if err != nil || string(b) != tc.want {
				t.Fatalf("%s (%v), want %s", b, err, tc.want)
			}
		})
	}
}

// TestBrowserURL: the browser's WebSocket URL follows the worker's scheme,
// and the header carries the token.
func TestBrowserURL(t *testing.T) {
	for base, want := range map[string]string{
		"http://127.0.0.1:8080":   "ws://127.0.0.1:8080/v1/sandboxes/sb1/browser",
		"https://worker.example/": "wss://worker.example/v1/sandboxes/sb1/browser",
	} {
		w := client.NewWorker(base, "tok", nil)
		if got := w.Sandbox("sb1").BrowserURL(); got != want {
			t.Errorf("BrowserURL of %s = %s, want %s", base, got, want)
		}
		if diff := cmp.Diff(http.Header{"Authorization": {"Bearer tok"}}, w.BrowserHeader()); diff != "" {
			t.Errorf("BrowserHeader (-want +got):\n%s", diff)
		}
	}
}

package main

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestCheckPreview(t *testing.T) {
	for _, tc := range []struct{ addr, base, want string }{
		{"", "", ""},
		{"127.0.0.1:0", "", ""},
		{"127.0.0.1:0", "https://{port}-{id}.preview.example", ""},
		{"", "https://{port}-{id}.preview.example", "--preview-base-url needs --preview-listen"},
		{"127.0.0.1:0", "https://preview.example", "--preview-base-url: preview base URL \"https://preview.example\": its host name must hold {port} and {id}"},
	} {
		err := checkPreview(tc.addr, tc.base)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("checkPreview(%q, %q) = %v, want %q", tc.addr, tc.base, err, tc.want)
		}
	}
}

// TestListenPreview: on loopback the base URL defaults to names under
// localhost with the port listened on; beyond loopback one must be given.
func TestListenPreview(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	ln, base, err := listenPreview("127.0.0.1:0", "", log)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if want := "http://{port}-{id}.localhost:" + ln.Addr().String()[len("127.0.0.1:"):]; base != want {
		t.Errorf("base %q, want %q", base, want)
	}
	ln2, _, err := listenPreview("0.0.0.0:0", "", log)
	var ce configError
	if err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), "give --preview-base-url") {
		if ln2 != nil {
			ln2.Close()
		}
		t.Fatalf("beyond loopback without a base URL: %v, want a configError", err)
	}
}

package wsmsg

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"
)

// pair returns the two ends of a WebSocket on loopback; the server end is
// made by Upgrader, and a handshake it refuses is answered by refuse.
func pair(t *testing.T) (client, server *Conn) {
	t.Helper()
	got := make(chan *Conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Upgrader(1024, refuse).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		got <- New(c)
	}))
	t.Cleanup(srv.Close)
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	client, server = New(c), <-got
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func refuse(w http.ResponseWriter, status int, why string) { http.Error(w, "refused: "+why, status) }

// TestSendReceive: messages keep their kind and bytes, larger than a
// frame included; Sends from several goroutines at once are each whole; a
// peer that closes is io.EOF.
func TestSendReceive(t *testing.T) {
	client, server := pair(t)
	want := []Message{{Text: true, Data: []byte(`{"type":"eof"}`)}, {Data: []byte{1, 0, 2}}, {Data: []byte(strings.Repeat("x", 5000))}}
	for _, m := range want {
		if err := client.Send(m, 0); err != nil {
			t.Fatal(err)
		}
		got, err := server.Receive()
		if err != nil || got.Text != m.Text || string(got.Data) != string(m.Data) {
			t.Fatalf("Receive = %v %.20q, %v; want %v %.20q", got.Text, got.Data, err, m.Text, m.Data)
		}
	}
	const senders, each = 8, 50
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for range each {
				if err := client.Send(Message{Data: []byte(strings.Repeat("y", 3000))}, 0); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for range senders * each {
		if m, err := server.Receive(); err != nil || len(m.Data) != 3000 {
			t.Fatalf("a concurrent send arrived as %d bytes, %v", len(m.Data), err)
		}
	}
	wg.Wait()
	client.Close()
	if _, err := server.Receive(); !errors.Is(err, io.EOF) {
		t.Fatalf("Receive after the peer closed = %v, want io.EOF", err)
	}
}

// TestUpgraderRefuses: a request that is no WebSocket handshake is
// answered by the refuse function, with the status and why.
func TestUpgraderRefuses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = Upgrader(1024, refuse).Upgrade(w, r, nil)
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(string(body), "refused: the WebSocket handshake: ") {
		t.Fatalf("answer %d %q", resp.StatusCode, body)
	}
}

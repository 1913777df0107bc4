package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"openvibe.network/agentsandbox/live/storetest"
)

// BenchmarkCheckIn measures the accept path (auth lookups, strict decode,
// validation, a durable SQLite write) over 100 streams from 32 clients per
// CPU (concurrent writes share the store's group commit): "Handler" calls
// the handler directly; "Loopback" goes through a real HTTP server on
// 127.0.0.1 on keep-alive connections;
// "LoopbackBare" is the same load on a bare net/http handler that only
// reads the body, for the ratio.
func BenchmarkCheckIn(b *testing.B) {
	const streams = 100
	f := newFixture(b, sqliteBackend, fixtureOptions{})
	ids := make([]string, streams)
	for i := range ids {
		ids[i] = f.newStream(b, f.owner)
	}
	body := validReport(b)
	b.Run("Handler", func(b *testing.B) {
		var next atomic.Uint64
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		b.SetParallelism(32)
		cpu0 := storetest.ProcessCPU(b)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r := httptest.NewRequest("POST", checkInPath(ids[next.Add(1)%streams]), bytes.NewReader(body))
				r.Header.Set("Authorization", "Bearer "+f.secrets["service"])
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set(SubjectHeader, f.owner)
				w := httptest.NewRecorder()
				f.handler.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Errorf("status %d: %s", w.Code, w.Body)
					return
				}
			}
		})
		storetest.ReportCPU(b, cpu0)
	})
	b.Run("Loopback", func(b *testing.B) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		defer client.CloseIdleConnections()
		var next atomic.Uint64
		b.SetBytes(int64(len(body)))
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := f.post(client, ids[next.Add(1)%streams], body); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("LoopbackBare", func(b *testing.B) {
		bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"registered":true}`))
		}))
		defer bare.Close()
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		defer client.CloseIdleConnections()
		b.SetBytes(int64(len(body)))
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				resp, err := client.Post(bare.URL+"/", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		})
	})
}

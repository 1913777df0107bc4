package httpapi

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestNew(t *testing.T) {
	st := openSQLite(t, nil)
	shared := prometheus.NewRegistry()
	if _, err := New(Config{Store: st, Registerer: shared, Gatherer: shared}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"ErrNoStore", Config{}},
		{"ErrNegativeWindow", Config{Store: st, Window: -time.Second}},
		{"ErrOnlyRegisterer", Config{Store: st, Registerer: prometheus.NewRegistry()}},
		{"ErrOnlyGatherer", Config{Store: st, Gatherer: prometheus.NewRegistry()}},
		{"ErrRegisteredTwice", Config{Store: st, Registerer: shared, Gatherer: shared}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil {
				t.Fatal("New accepted the config")
			}
		})
	}
	t.Run("OwnRegistry", func(t *testing.T) {
		s, err := New(Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		body, _ := io.ReadAll(w.Body)
		for _, want := range []string{"go_goroutines", `ovlive_checkins_total{outcome="accepted"} 0`, `ovlive_checkins_total{outcome="refused_contract"} 0`} {
			if !strings.Contains(string(body), want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}

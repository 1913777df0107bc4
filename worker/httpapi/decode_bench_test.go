package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkDecodeJSON decodes a create's body and an exec's with 1 MiB of
// stdin the way the API does (strict: names case-sensitive, unknown and
// repeated names refused at any depth), next to encoding/json with
// DisallowUnknownFields, which the API used before (it let repeated names
// and case-folded ones through): compare the two in one run.
func BenchmarkDecodeJSON(b *testing.B) {
	bodies := []struct {
		name, body string
		new        func() any
	}{
		{"Create", `{"time_box_minutes":10,"env":{"GOFLAGS":"-mod=mod","CI":"1"},"browser":{"start":true},` +
			`"egress":{"mode":"allow","allow":["pypi.org","*.pythonhosted.org"]},"limits":{"memory_mb":1024,"pids":128}}`,
			func() any { return new(CreateRequest) }},
		{"Exec1MiB", `{"argv":["python3","-c","import sys; print(len(sys.stdin.read()))"],"stdin":"` +
			strings.Repeat("0123456789abcdef", 1<<16) + `","timeout_seconds":30}`,
			func() any { return new(ExecRequest) }},
	}
	s := &Server{cfg: Config{MaxBody: DefaultMaxBody}}
	for _, bc := range bodies {
		b.Run(bc.name+"/strict", func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest("POST", "/", strings.NewReader(bc.body))
				if err := s.decodeJSON(httptest.NewRecorder(), r, bc.new()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest("POST", "/", strings.NewReader(bc.body))
				dec := json.NewDecoder(http.MaxBytesReader(httptest.NewRecorder(), r.Body, s.cfg.MaxBody))
				dec.DisallowUnknownFields()
				if err := dec.Decode(bc.new()); err != nil {
					b.Fatal(err)
				}
				if _, err := dec.Token(); !errors.Is(err, io.EOF) {
					b.Fatal(err)
				}
			}
		})
	}
}

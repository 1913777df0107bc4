package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"openvibe.network/agentsandbox/live"
)

// TestAcceptedJSON checks that the accepted answer's own encoder writes
// what json.Marshal writes, for every kind of time it may be given.
func TestAcceptedJSON(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 123456789, time.UTC)
	until := at.Add(live.AliveWindow)
	for _, tc := range []struct {
		name string
		a    accepted
	}{
		{"OK", accepted{Registered: true, State: live.StateAlive, AliveUntil: &until, ReceivedAt: at}},
		{"WholeSecond", accepted{Registered: true, State: live.StateAlive, AliveUntil: new(at.Truncate(time.Second)), ReceivedAt: at.Truncate(time.Second)}},
		{"NoAliveUntil", accepted{Registered: false, State: live.StateStale, ReceivedAt: at}},
		{"Zone", accepted{Registered: true, State: live.StateAlive, AliveUntil: new(until.In(time.FixedZone("X", 5*3600+30*60))), ReceivedAt: at.In(time.FixedZone("Y", -3600))}},
		{"ZoneSeconds", accepted{Registered: true, State: live.StateAlive, ReceivedAt: at.In(time.FixedZone("Z", 17))}},
		{"Zero", accepted{}},
		{"YearOutOfRange", accepted{Registered: true, State: live.StateAlive, AliveUntil: new(at.AddDate(9000, 0, 0)), ReceivedAt: at}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(tc.a)
			if err != nil {
				want = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
			}
			want = append(want, '\n')
			if got := tc.a.appendJSON(nil); !bytes.Equal(got, want) {
				t.Errorf("appendJSON = %s, json.Marshal = %s", got, want)
			}
		})
	}
}

// TestReadBody checks that readBody reads what io.ReadAll reads, whatever
// length the request declared and however the reader hands out its bytes.
func TestReadBody(t *testing.T) {
	body := strings.Repeat("0123456789", 200)
	for _, tc := range []struct {
		name     string
		declared int64
		r        func(string) io.Reader
	}{
		{"Declared", int64(len(body)), func(s string) io.Reader { return strings.NewReader(s) }},
		{"Unknown", -1, func(s string) io.Reader { return strings.NewReader(s) }},
		{"DeclaredShort", 10, func(s string) io.Reader { return strings.NewReader(s) }},
		{"DeclaredLong", 5000, func(s string) io.Reader { return strings.NewReader(s) }},
		{"OneByteReads", int64(len(body)), func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) }},
		{"DataErrEOF", int64(len(body)), func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) }},
		{"Empty", 0, func(string) io.Reader { return strings.NewReader("") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := body
			if tc.name == "Empty" {
				src = ""
			}
			got, err := readBody(tc.r(src), tc.declared)
			if err != nil || string(got) != src {
				t.Errorf("readBody = %d bytes, %v; want %d bytes", len(got), err, len(src))
			}
		})
	}
	t.Run("ErrRead", func(t *testing.T) {
		if _, err := readBody(iotest.ErrReader(io.ErrUnexpectedEOF), 10); err != io.ErrUnexpectedEOF {
			t.Errorf("err = %v, want %v", err, io.ErrUnexpectedEOF)
		}
	})
}

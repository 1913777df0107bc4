package sandbox

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
)

// TestRun covers the one-command sandbox of `codes-sandbox run`: the same
// isolation, streams handed over directly, limits named, a verified wipe.
func TestRun(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	for _, tc := range []struct {
		name       string
		opts       Options
		argv       []string
		stdin      string
		wantCode   int
		wantReason string
		wantOut    string
	}{
		{name: "ExitCode", argv: []string{"sh", "-c", "exit 7"}, wantCode: 7},
		{name: "Streams", argv: []string{"sh", "-c", "tr a-z A-Z; ls /proc/self/fd | tr '\\n' ' '"}, stdin: "abc\n", wantOut: "ABC\n0 1 2 3 "},
		{name: "Isolation", argv: []string{"sh", "-c", "id -u; grep -E '^(CapEff|Seccomp):' /proc/self/status | cut -f2; tail -n +3 /proc/net/dev | cut -d: -f1"},
			wantOut: "1000\n0000000000000000\n2\n    lo\n"},
		{name: "Env", opts: Options{Env: map[string]string{"A": "b"}}, argv: []string{"sh", "-c", "env | sort"},
			wantOut: "A=b\nHOME=/workspace\nLANG=C.UTF-8\nPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nPWD=/workspace\nTERM=dumb\nUSER=sandbox\n"},
		{name: "TimeBox", opts: Options{TimeBox: time.Second}, argv: []string{"sleep", "60"}, wantCode: 137, wantReason: "time_box"},
		{name: "Memory", opts: Options{Limits: agentsandbox.Limits{MemoryMB: 64}}, argv: []string{"python3", "-c", "x = b'a' * (512 << 20)"}, wantCode: 137, wantReason: "memory"},
		{name: "Pids", opts: Options{Limits: agentsandbox.Limits{Pids: 24}}, argv: []string{"sh", "-c", "i=0; while [ $i -lt 100 ]; do sleep 30 & i=$((i+1)); done; wait"}, wantCode: 2, wantReason: "pids"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			var out bytes.Buffer
			res, rep, err := rt.Run(ctx, tc.opts, tc.argv, strings.NewReader(tc.stdin), &out, &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tc.wantCode || res.Reason != tc.wantReason || (tc.wantOut != "" && out.String() != tc.wantOut) {
				t.Fatalf("got %+v %q, want exit %d reason %q out %q", res, out.String(), tc.wantCode, tc.wantReason, tc.wantOut)
			}
			if !rep.Verified || rt.Active() != 0 {
				t.Fatalf("wipe %+v, active %d", rep, rt.Active())
			}
		})
	}
	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		out := &signalWriter{want: "started", seen: make(chan struct{})}
		go func() { <-out.seen; cancel() }()
		res, rep, err := rt.Run(ctx, Options{}, []string{"sh", "-c", "echo started; exec sleep 60"}, nil, out, &bytes.Buffer{})
		if !errors.Is(err, context.Canceled) || res.Reason != "deleted" || !rep.Verified {
			t.Fatalf("cancelled run: %v %+v %+v", err, res, rep)
		}
	})
	t.Run("ErrEgress", func(t *testing.T) {
		if _, _, err := rt.Run(context.Background(), Options{Egress: true}, []string{"true"}, nil, nil, nil); err == nil {
			t.Fatal("Run with egress succeeded")
		}
	})
}

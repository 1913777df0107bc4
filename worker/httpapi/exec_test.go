package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/worker/httpapi/apitest"
	"openvibe.network/agentsandbox/workerapi"
)

// waitLong bounds waits that only a broken implementation would exhaust.
const waitLong = 60 * time.Second

// readEvent reads one NDJSON event line.
func readEvent(tb testing.TB, br *bufio.Reader) ExecEvent {
	tb.Helper()
	line, err := br.ReadBytes('\n')
	if err != nil {
		tb.Fatalf("read event: %v (got %q)", err, line)
	}
	var ev ExecEvent
	dec := json.NewDecoder(strings.NewReader(string(line)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		tb.Fatalf("event %q: %v", line, err)
	}
	return ev
}

// readAll reads events up to the end of the stream.
func readAll(tb testing.TB, r io.Reader) []ExecEvent {
	tb.Helper()
	br := bufio.NewReader(r)
	var evs []ExecEvent
	for {
		if _, err := br.Peek(1); err == io.EOF {
			return evs
		}
		evs = append(evs, readEvent(tb, br))
	}
}

// postExec starts an exec and returns the open answer.
func postExec(tb testing.TB, ts *testServer, id, body string) *http.Response {
	tb.Helper()
	req, _ := http.NewRequest("POST", ts.srv.URL+"/v1/sandboxes/"+id+"/exec", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := ts.srv.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		tb.Fatalf("exec answer %d %v", resp.StatusCode, resp.Header)
	}
	return resp
}

func code(n int) *int { return &n }

func TestExecStreamsBeforeTheEnd(t *testing.T) {
	fake := apitest.NewFake(1)
	release := make(chan struct{})
	var got agentsandbox.ExecRequest
	fake.ExecFunc = func(ctx context.Context, _ string, req agentsandbox.ExecRequest, stdout, stderr io.Writer) (agentsandbox.ExecResult, error) {
		got = req
		fmt.Fprint(stdout, "first\n")
		select {
		case <-release:
		case <-ctx.Done():
			return agentsandbox.ExecResult{}, ctx.Err()
		}
		fmt.Fprint(stderr, "second\n")
		fmt.Fprint(stdout, "third\n")
		return agentsandbox.ExecResult{ExitCode: 3, Reason: "timeout"}, nil
	}
	id := mustCreate(t, fake)
	ts := newTestServer(t, fake, nil)
	resp := postExec(t, ts, id, `{"argv":["sh","-c","x"],"env":{"A":"1"},"cwd":"/workspace/src","stdin":"in","timeout_seconds":7}`)
	br := bufio.NewReader(resp.Body)
	if ev := readEvent(t, br); !reflect.DeepEqual(ev, ExecEvent{Stream: "stdout", Data: "first\n"}) {
		t.Fatalf("first event %+v", ev)
	}
	close(release) // the command ends only after its first output was received
	want := []ExecEvent{{Stream: "stderr", Data: "second\n"}, {Stream: "stdout", Data: "third\n"}, {ExitCode: code(3), Reason: "timeout"}}
	if evs := readAll(t, br); !reflect.DeepEqual(evs, want) {
		t.Fatalf("events %+v, want %+v", evs, want)
	}
	wantReq := agentsandbox.ExecRequest{Argv: []string{"sh", "-c", "x"}, Env: map[string]string{"A": "1"}, Cwd: "src", Stdin: []byte("in"), Timeout: 7 * time.Second}
	if !reflect.DeepEqual(got, wantReq) {
		t.Fatalf("runtime got %+v, want %+v", got, wantReq)
	}
}

func TestExecEvents(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		exec apitest.ExecFunc
		want []ExecEvent
	}{
		{name: "StdinText", body: `{"argv":["cat"],"stdin":"héllo"}`, want: []ExecEvent{{Stream: "stdout", Data: "héllo"}, {ExitCode: code(0)}}},
		{name: "StdinBase64Binary", body: `{"argv":["cat"],"stdin_base64":"//5h"}`,
			want: []ExecEvent{{Stream: "stdout", DataBase64: "//5h"}, {ExitCode: code(0)}}},
		{name: "NoOutput", body: `{"argv":["true"]}`, want: []ExecEvent{{ExitCode: code(0)}}},
		{name: "SplitRune", body: `{"argv":["x"]}`, exec: func(_ context.Context, _ string, _ agentsandbox.ExecRequest, stdout, stderr io.Writer) (agentsandbox.ExecResult, error) {
			stdout.Write([]byte("h\xc3"))
			stderr.Write([]byte("e"))
			stdout.Write([]byte("\xa9!"))
			return agentsandbox.ExecResult{ExitCode: 1}, nil
		}, want: []ExecEvent{{Stream: "stdout", Data: "h"}, {Stream: "stderr", Data: "e"}, {Stream: "stdout", Data: "é!"}, {ExitCode: code(1)}}},
		{name: "TruncatedRuneAtEnd", body: `{"argv":["x"]}`, exec: func(_ context.Context, _ string, _ agentsandbox.ExecRequest, stdout, _ io.Writer) (agentsandbox.ExecResult, error) {
			stdout.Write([]byte("ok\xe2\x82"))
			return agentsandbox.ExecResult{ExitCode: 0}, nil
		}, want: []ExecEvent{{Stream: "stdout", Data: "ok"}, {Stream: "stdout", DataBase64: "4oI="}, {ExitCode: code(0)}}},
		{name: "ErrDeletedMeanwhile", body: `{"argv":["x"]}`, exec: func(context.Context, string, agentsandbox.ExecRequest, io.Writer, io.Writer) (agentsandbox.ExecResult, error) {
			return agentsandbox.ExecResult{}, fmt.Errorf("exec: %w", sandbox.ErrNotFound)
		}, want: []ExecEvent{{Error: &workerapi.Error{Code: "sandbox_not_found", Message: `no sandbox "sb-1" on this worker (it may have been deleted or its time box ended)`}}}},
		{name: "ErrRuntime", body: `{"argv":["x"]}`, exec: func(context.Context, string, agentsandbox.ExecRequest, io.Writer, io.Writer) (agentsandbox.ExecResult, error) {
			return agentsandbox.ExecResult{}, fmt.Errorf("init: broken pipe")
		}, want: []ExecEvent{{Error: &workerapi.Error{Code: "internal", Message: "the worker failed; its log says why"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := apitest.NewFake(1)
			fake.ExecFunc = tc.exec
			id := mustCreate(t, fake)
			ts := newTestServer(t, fake, nil)
			resp := postExec(t, ts, id, tc.body)
			if evs := readAll(t, resp.Body); !reflect.DeepEqual(evs, tc.want) {
				t.Fatalf("events %s, want %s", jsonOf(evs), jsonOf(tc.want))
			}
		})
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// rawExec sends an exec on a raw connection and does not read the answer.
func rawExec(tb testing.TB, ts *testServer, id string) net.Conn {
	tb.Helper()
	conn, err := net.Dial("tcp", ts.srv.Listener.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	// a small receive buffer, so the kernel cannot absorb what the client
	// does not read, whatever the machine's TCP autotuning
	if err := conn.(*net.TCPConn).SetReadBuffer(16 << 10); err != nil {
		tb.Fatal(err)
	}
	body := `{"argv":["yes"]}`
	fmt.Fprintf(conn, "POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		id, testToken, len(body), body)
	return conn
}

// TestExecSlowClientDropsOutput: a client that does not read while the
// command writes 64 MiB does not hold the command up; the output that did
// not fit is dropped and the events say how much.
func TestExecSlowClientDropsOutput(t *testing.T) {
	const total = 64 << 20
	fake := apitest.NewFake(1)
	finished := make(chan struct{})
	fake.ExecFunc = func(_ context.Context, _ string, _ agentsandbox.ExecRequest, stdout, _ io.Writer) (agentsandbox.ExecResult, error) {
		defer close(finished)
		chunk := []byte(strings.Repeat("y\n", 32<<10))
		for n := 0; n < total; n += len(chunk) {
			stdout.Write(chunk)
		}
		return agentsandbox.ExecResult{ExitCode: 0}, nil
	}
	id := mustCreate(t, fake)
	ts := newTestServer(t, fake, func(c *Config) { c.StreamBuffer = 256 << 10; c.WriteTimeout = 10 * waitLong })
	conn := rawExec(t, ts, id)
	select {
	case <-finished: // the command ended while nobody read its output
	case <-time.After(waitLong):
		t.Fatal("the command was held up by a client that does not read")
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	evs := readAll(t, resp.Body)
	var got, dropped int64
	for _, ev := range evs[:len(evs)-1] {
		got += int64(len(ev.Data))
		dropped += ev.DroppedBytes
		if ev.Stream != "stdout" || (ev.Data == "") == (ev.DroppedBytes == 0) {
			t.Fatalf("event %+v", ev)
		}
	}
	last := evs[len(evs)-1]
	if last.ExitCode == nil || *last.ExitCode != 0 || last.DroppedBytes != dropped || dropped == 0 || got+dropped != total {
		t.Fatalf("last %+v; received %d + dropped %d, want %d in all with some dropped", last, got, dropped, total)
	}
}

// TestExecStalledClientEndsCommand: a client that stops reading for longer
// than the write timeout is taken as gone, and the command is cancelled.
func TestExecStalledClientEndsCommand(t *testing.T) {
	fake := apitest.NewFake(1)
	cancelled := make(chan struct{})
	fake.ExecFunc = func(ctx context.Context, _ string, _ agentsandbox.ExecRequest, stdout, _ io.Writer) (agentsandbox.ExecResult, error) {
		chunk := []byte(strings.Repeat("y\n", 4<<10))
		for ctx.Err() == nil {
			stdout.Write(chunk)
			select {
			case <-ctx.Done():
			case <-time.After(time.Millisecond):
			}
		}
		close(cancelled)
		return agentsandbox.ExecResult{ExitCode: 137, Reason: "deleted"}, nil
	}
	id := mustCreate(t, fake)
	ts := newTestServer(t, fake, func(c *Config) { c.StreamBuffer = 64 << 10; c.WriteTimeout = 100 * time.Millisecond })
	rawExec(t, ts, id)
	select {
	case <-cancelled:
	case <-time.After(waitLong):
		t.Fatal("the command of a stalled client was not cancelled")
	}
	waitFor(t, func() bool { return strings.Contains(ts.logs.String(), `"client":"stalled or gone`) })
}

// waitFor polls cond until it holds (failing after waitLong).
func waitFor(tb testing.TB, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(waitLong)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatal("condition not met in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOutQueue(t *testing.T) {
	q := newOutQueue(200)
	q.write(stdout, []byte("aa"))
	q.write(stdout, []byte("bb"))      // merged into one chunk (68 bytes with its overhead)
	q.write(stderr, []byte("c"))       // a second chunk: 133 bytes queued
	q.write(stdout, make([]byte, 100)) // 3 bytes fit (in a third chunk), 97 are dropped
	q.write(stderr, make([]byte, 7))   // nothing fits: dropped into the same marker
	want := []chunk{
		{stream: stdout, data: []byte("aabb")},
		{stream: stderr, data: []byte("c")},
		{stream: stdout, data: make([]byte, 3)},
		{dropped: [2]int64{97, 7}},
	}
	if got := q.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("chunks %+v, want %+v", got, want)
	}
	q.write(stderr, []byte("d")) // fits again once the client took the rest
	q.write(stdout, make([]byte, 500))
	want = []chunk{{stream: stderr, data: []byte("d")}, {stream: stdout, data: make([]byte, 200-65-64)}, {dropped: [2]int64{500 - 71, 0}}}
	if got := q.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("chunks %+v, want %+v", got, want)
	}
	total, dropped := q.counts()
	if total != [2]int64{604, 9} || dropped != [2]int64{97 + 429, 7} {
		t.Fatalf("total %v dropped %v", total, dropped)
	}
	if got := q.take(); got != nil {
		t.Fatalf("third take %+v", got)
	}
}

// TestExecOutlivesServerWriteTimeout: a command that runs longer than the
// http.Server's WriteTimeout still streams to its end, as each event gets
// its own write deadline.
func TestExecOutlivesServerWriteTimeout(t *testing.T) {
	const serverTimeout = 100 * time.Millisecond
	fake := apitest.NewFake(1)
	gotA := make(chan struct{})
	fake.ExecFunc = func(ctx context.Context, _ string, _ agentsandbox.ExecRequest, stdout, _ io.Writer) (agentsandbox.ExecResult, error) {
		fmt.Fprint(stdout, "a")
		select { // "a" is an event of its own, whatever the machine's load
		case <-gotA:
		case <-ctx.Done():
			return agentsandbox.ExecResult{}, ctx.Err()
		}
		time.Sleep(3 * serverTimeout) // silent for longer than the server's timeout
		fmt.Fprint(stdout, "b")
		return agentsandbox.ExecResult{}, nil
	}
	id := mustCreate(t, fake)
	s, err := New(Config{Runtime: fake, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.Config.WriteTimeout = serverTimeout
	srv.Start()
	defer srv.Close()
	resp := postExec(t, &testServer{srv: srv}, id, `{"argv":["x"]}`)
	br := bufio.NewReader(resp.Body)
	evs := []ExecEvent{readEvent(t, br)}
	close(gotA)
	evs = append(evs, readAll(t, br)...)
	want := []ExecEvent{{Stream: "stdout", Data: "a"}, {Stream: "stdout", Data: "b"}, {ExitCode: code(0)}}
	if !reflect.DeepEqual(evs, want) {
		t.Fatalf("events %s", jsonOf(evs))
	}
}

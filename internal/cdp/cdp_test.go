package cdp

import (
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// message is one message of a fakePipe: its text, or (big > 0) an
// oversized one of that many bytes, head, filler and tail (valid JSON),
// never held whole.
type message struct {
	text       string
	big        int
	head, tail string
}

// fakePipe is a browser's --remote-debugging-pipe as sandbox.BrowserConn
// carries it: messages handed over in parts of at most partSize bytes from
// one reused buffer. Its Next assembles a whole message, as BrowserConn's
// does. It answers each call with the messages queued for it.
type fakePipe struct {
	queue   []message
	cur     *message
	off     int
	buf     []byte
	sent    []string
	replies func(id int64) []message
}

const partSize = 64 << 10

func (p *fakePipe) Send(msg []byte) error {
	var req struct {
		ID     int64  `json:"id"`
		Method string `json:"method"`
	}
	if err := json.Unmarshal(msg, &req); err != nil {
		return err
	}
	p.sent = append(p.sent, req.Method)
	p.queue = append(p.queue, p.replies(req.ID)...)
	return nil
}

func (p *fakePipe) NextPart() ([]byte, bool, error) {
	if p.cur == nil {
		if len(p.queue) == 0 {
			return nil, false, io.EOF
		}
		p.cur, p.off = &p.queue[0], 0
		p.queue = p.queue[1:]
	}
	m := p.cur
	if m.big == 0 {
		p.cur = nil
		return []byte(m.text), true, nil
	}
	if p.buf == nil {
		p.buf = make([]byte, partSize)
	}
	n := min(partSize, m.big-p.off)
	for i := range p.buf[:n] {
		p.buf[i] = 'x'
	}
	if p.off == 0 {
		copy(p.buf, m.head)
	}
	if p.off+n == m.big {
		copy(p.buf[n-len(m.tail):n], m.tail)
	}
	p.off += n
	last := p.off == m.big
	if last {
		p.cur = nil
	}
	return p.buf[:n], last, nil
}

func (p *fakePipe) Next() ([]byte, error) {
	var msg []byte
	for {
		part, last, err := p.NextPart()
		if err != nil {
			return nil, err
		}
		msg = append(msg, part...)
		if last {
			return msg, nil
		}
	}
}

// allocated is the bytes this process allocated so far: a message held
// whole, even for a moment, is allocated whole.
func allocated() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

const version = `{"protocolVersion":"1.3","product":"HeadlessChrome/131.0","revision":"@r","userAgent":"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0","jsVersion":"13.1"}`

// TestOversizedMessages: a 60 MB message written into the browser's pipe
// (an event, or another call's answer) is skipped part by part: the
// client's heap stays far under it, and the answer after it is read; when
// the oversized message is the call's own answer, the call fails with
// ErrTooLarge, and the next call works.
func TestOversizedMessages(t *testing.T) {
	const big = 60 << 20
	for _, tc := range []struct {
		name    string
		before  func(id int64) []message
		wantErr error
	}{
		{"Event", func(int64) []message {
			return []message{{big: big, head: `{"method":"Page.frameNavigated","params":{"frame":"`, tail: `"}}`}}
		}, nil},
		{"OtherAnswer", func(id int64) []message {
			return []message{{big: big, head: `{"id":` + itoa(id+7) + `,"result":{"data":"`, tail: `"}}`}}
		}, nil},
		{"OwnAnswer", func(id int64) []message {
			return []message{{big: big, head: `{"id":` + itoa(id) + `,"result":{"data":"`, tail: `"}}`}}
		}, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := true
			p := &fakePipe{replies: func(id int64) []message {
				reply := message{text: `{"id":` + itoa(id) + `,"result":` + version + `}`}
				if first {
					first = false
					if m := tc.before(id); m[0].head[:6] == `{"id":` && tc.wantErr != nil {
						return m // the answer itself is the oversized message
					}
					return append(tc.before(id), reply)
				}
				return []message{reply}
			}}
			c := New(p)
			before := allocated()
			_, err := c.GetVersion()
			grown := allocated() - before
			t.Logf("the call allocated %d KiB with a %d MiB message in the pipe", grown>>10, big>>20)
			if grown > 8<<20 {
				t.Errorf("the call allocated %d MiB with a %d MiB message in the pipe; want it skipped part by part", grown>>20, big>>20)
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("GetVersion: %v, want %v", err, tc.wantErr)
			}
			v, err := c.GetVersion()
			want := Version{ProtocolVersion: "1.3", Product: "HeadlessChrome/131.0", Revision: "@r",
				UserAgent: "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0", JSVersion: "13.1"}
			if err != nil {
				t.Fatalf("the next call: %v", err)
			}
			if diff := cmp.Diff(want, v); diff != "" {
				t.Fatalf("version (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLeadingID(t *testing.T) {
	for head, want := range map[string]int64{
		`{"id":12,"result":{`: 12,
		` {"id":3,`:           3,
		`{"id":12`:            -1, // the number may go on
		`{"method":"x"`:       -1,
		`{"id":"12",`:         -1,
		`{ "id":12,`:          -1,
	} {
		if got := leadingID([]byte(head)); got != want {
			t.Errorf("leadingID(%q) = %d, want %d", head, got, want)
		}
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

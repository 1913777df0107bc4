package httpapi

import (
	"encoding/base64"
	"sync"
	"unicode/utf8"
)

// Stream indexes.
const (
	stdout = iota
	stderr
)

var streamNames = [2]string{"stdout", "stderr"}

// Sizes of the output queue.
const (
	maxChunk      = 64 << 10 // bytes merged into one event at most
	chunkOverhead = 64       // bytes a chunk costs beyond its data, so tiny writes cannot grow memory unbounded
)

// chunk is queued output of one stream, or (when data is nil) a marker of
// output dropped because the queue was full.
type chunk struct {
	stream  int
	data    []byte
	dropped [2]int64
}

// outQueue is the bounded buffer between a command's output and the client.
// Writes never block: output that does not fit is dropped and a marker is
// queued in its place, so a slow client loses output instead of stalling
// the sandbox.
type outQueue struct {
	mu      sync.Mutex
	chunks  []chunk
	size    int
	max     int
	total   [2]int64
	dropped [2]int64
	wake    chan struct{}
	// started is closed once the runtime says the command started.
	started   chan struct{}
	startOnce sync.Once
}

func newOutQueue(max int) *outQueue {
	return &outQueue{max: max, wake: make(chan struct{}, 1), started: make(chan struct{})}
}

// write queues a copy of p as output of stream; what does not fit is
// dropped.
func (q *outQueue) write(stream int, p []byte) {
	if len(p) == 0 {
		return
	}
	q.mu.Lock()
	q.total[stream] += int64(len(p))
	if room := q.max - q.size - chunkOverhead; room > 0 {
		keep := p[:min(room, len(p))]
		q.queue(stream, keep)
		p = p[len(keep):]
	}
	if len(p) > 0 {
		q.drop(stream, int64(len(p)))
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// queue adds data to the last chunk when it is of the same stream and not
// too big, else as a new chunk. q.mu is held.
func (q *outQueue) queue(stream int, data []byte) {
	if n := len(q.chunks); n > 0 {
		if last := &q.chunks[n-1]; last.data != nil && last.stream == stream && len(last.data)+len(data) <= maxChunk {
			last.data = append(last.data, data...)
			q.size += len(data)
			return
		}
	}
	q.chunks = append(q.chunks, chunk{stream: stream, data: append([]byte(nil), data...)})
	q.size += len(data) + chunkOverhead
}

// drop counts n bytes of stream as dropped, in the marker at the end of the
// queue (a new one unless the last chunk is one). q.mu is held.
func (q *outQueue) drop(stream int, n int64) {
	q.dropped[stream] += n
	if k := len(q.chunks); k == 0 || q.chunks[k-1].data != nil {
		q.chunks = append(q.chunks, chunk{})
		q.size += chunkOverhead
	}
	q.chunks[len(q.chunks)-1].dropped[stream] += n
}

// take returns every queued chunk and empties the queue.
func (q *outQueue) take() []chunk {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := q.chunks
	q.chunks, q.size = nil, 0
	return c
}

// counts returns the bytes written and dropped per stream so far.
func (q *outQueue) counts() (total, dropped [2]int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.total, q.dropped
}

// streamWriter is the io.Writer of one stream handed to the runtime.
type streamWriter struct {
	q      *outQueue
	stream int
}

// Write queues p; it never blocks and never fails.
func (w streamWriter) Write(p []byte) (int, error) {
	w.q.write(w.stream, p)
	return len(p), nil
}

// Started is told by the runtime that the command started.
func (w streamWriter) Started(int) { w.q.startOnce.Do(func() { close(w.q.started) }) }

// Dropped is told by the runtime of output its sandbox dropped before it
// reached the queue (counted as this stream's).
func (w streamWriter) Dropped(n int64) {
	w.q.mu.Lock()
	w.q.total[w.stream] += n
	w.q.drop(w.stream, n)
	w.q.mu.Unlock()
	select {
	case w.q.wake <- struct{}{}:
	default:
	}
}

// utf8Joiner keeps a rune split between two chunks of a stream together, so
// text output stays text in the events.
type utf8Joiner struct {
	tail [2][]byte
}

// next returns the bytes of stream to send now: what was held back, then
// data, less an incomplete rune at the end when the rest is valid UTF-8.
func (j *utf8Joiner) next(stream int, data []byte) []byte {
	b := append(j.tail[stream], data...)
	j.tail[stream] = nil
	cut := len(b)
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		if c := b[len(b)-i]; utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				cut = len(b) - i
			}
			break
		}
	}
	if cut < len(b) && utf8.Valid(b[:cut]) {
		j.tail[stream] = append([]byte(nil), b[cut:]...)
		return b[:cut]
	}
	return b
}

// flush returns what is still held back of stream.
func (j *utf8Joiner) flush(stream int) []byte {
	b := j.tail[stream]
	j.tail[stream] = nil
	return b
}

// dataEvent makes the event of output data: text when it is valid UTF-8,
// else the exact bytes in base64.
func dataEvent(stream int, data []byte) ExecEvent {
	ev := ExecEvent{Stream: streamNames[stream]}
	if utf8.Valid(data) {
		ev.Data = string(data)
		return ev
	}
	ev.DataBase64 = base64.StdEncoding.EncodeToString(data)
	return ev
}

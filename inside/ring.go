package inside

import (
	"sync"
)

// ring keeps the last bytes of a process's output, each chunk tagged with
// its stream (control.FrameStdout or FrameStderr), and the offset of every
// byte in the whole output, so that a follower can resume where it was and
// learn how much it missed. Past the ring's capacity the oldest chunks go,
// except while the ring is held: a foreground command's ring is held by its
// caller from the start until the caller releases it, and while held a write
// waits until the caller has taken what it would push out (the command waits
// as on a full pipe), so a caller that keeps reading misses nothing. No other
// follower ever holds a write back. It is safe for concurrent use.
type ring struct {
	mu      sync.Mutex
	taken   sync.Cond // signalled when the holder takes output or lets go
	cap     int
	held    bool  // a caller holds the ring
	read    int64 // offset after what the holder has taken
	chunks  []chunk
	size    int   // bytes held
	start   int64 // offset of the first byte held
	total   int64 // offset after the last byte written
	ended   bool
	changed chan struct{} // closed (and replaced) at every write and at the end
}

// chunk is one write of output.
type chunk struct {
	stream byte
	off    int64
	data   []byte
}

// newRing makes a ring of capacity bytes, held by its caller when held.
func newRing(capacity int, held bool) *ring {
	r := &ring{cap: capacity, held: held, changed: make(chan struct{})}
	r.taken.L = &r.mu
	return r
}

// took tells a held ring that its holder has taken the output before off.
func (r *ring) took(off int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if off > r.read {
		r.read = off
		r.taken.Broadcast()
	}
}

// release lets writes go on without waiting for the holder (it left).
func (r *ring) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held = false
	r.taken.Broadcast()
}

// write adds p as output of stream.
func (r *ring) write(stream byte, p []byte) {
	if len(p) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.held && r.total > r.read && r.total+int64(len(p))-r.read > int64(r.cap) {
		r.taken.Wait()
	}
	r.chunks = append(r.chunks, chunk{stream: stream, off: r.total, data: append([]byte(nil), p...)})
	r.total += int64(len(p))
	r.size += len(p)
	for r.size > r.cap && len(r.chunks) > 0 {
		first := r.chunks[0]
		if drop := r.size - r.cap; drop < len(first.data) {
			r.chunks[0] = chunk{stream: first.stream, off: first.off + int64(drop), data: first.data[drop:]}
			r.size -= drop
			break
		}
		r.chunks = r.chunks[1:]
		r.size -= len(first.data)
	}
	if len(r.chunks) > 0 {
		r.start = r.chunks[0].off
	} else {
		r.start = r.total
	}
	r.notify()
}

// end marks the output complete: no more writes come.
func (r *ring) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ended {
		r.ended = true
		r.notify()
	}
}

// notify wakes the followers; the caller holds mu.
func (r *ring) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// readFrom returns the chunks from offset off on, how many bytes before the
// first of them the follower missed (they were dropped), the offset to read
// from next, whether the output is complete, and a channel closed at the
// next change.
func (r *ring) readFrom(off int64) (out []chunk, missed, next int64, ended bool, changed <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if off < r.start {
		missed, off = r.start-off, r.start
	}
	for _, c := range r.chunks {
		end := c.off + int64(len(c.data))
		if end <= off {
			continue
		}
		if c.off < off {
			c = chunk{stream: c.stream, off: off, data: c.data[off-c.off:]}
		}
		out = append(out, c)
	}
	return out, missed, r.total, r.ended, r.changed
}

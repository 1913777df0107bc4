package main

import (
	"io"
	"sync"
	"time"
)

// Bounds of the log's buffer: lines reach the log within logFlushInterval,
// or at once when logBufferSize bytes wait.
const (
	logFlushInterval = 20 * time.Millisecond
	logBufferSize    = 64 << 10
)

// logWriter passes the log's lines to w in batches, so that serving a
// request does not cost a write system call for its log line: Write keeps
// the line and returns, a goroutine writes what waits every
// logFlushInterval (or as soon as logBufferSize bytes wait), and Close
// writes the rest. Each Write (one slog record) is written whole. What a
// crash (kill -9) loses is at most the last logFlushInterval of lines.
type logWriter struct {
	w    io.Writer
	mu   sync.Mutex
	buf  []byte
	full chan struct{} // a flush is due now
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

func newLogWriter(w io.Writer) *logWriter {
	l := &logWriter{w: w, full: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

// Write keeps p for the next flush; it never fails (a failure to write the
// log cannot be reported anywhere else).
func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf = append(l.buf, p...)
	n := len(l.buf)
	l.mu.Unlock()
	if n >= logBufferSize {
		select {
		case l.full <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

func (l *logWriter) run() {
	defer close(l.done)
	t := time.NewTicker(logFlushInterval)
	defer t.Stop()
	var spare []byte
	for {
		select {
		case <-t.C:
		case <-l.full:
		case <-l.quit:
			l.flush(&spare)
			return
		}
		l.flush(&spare)
	}
}

// flush writes what waits, reusing spare as the next buffer.
func (l *logWriter) flush(spare *[]byte) {
	l.mu.Lock()
	out := l.buf
	l.buf = (*spare)[:0]
	l.mu.Unlock()
	if len(out) > 0 {
		_, _ = l.w.Write(out)
	}
	*spare = out
}

// Close writes what waits and stops the writer; later Writes are kept but
// never written.
func (l *logWriter) Close() error {
	l.once.Do(func() {
		close(l.quit)
		<-l.done
	})
	return nil
}

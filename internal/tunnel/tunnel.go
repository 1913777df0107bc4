// Package tunnel joins two connections, copying each way until both end
// (with splice(2) between sockets, so the bytes never cross user space),
// with an optional idle timeout; and hands a connection's descriptor to the
// process at the other end of a unix socket (Hand, Take), so that it serves
// the connection itself. The egress proxy's CONNECT tunnels and the
// in-sandbox bridge both use it.
package tunnel

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// maxTick bounds how long a tunnel direction copies before it looks at the
// idle clock again.
const maxTick = 5 * time.Second

// errIdle ends a tunnel that saw no traffic either way for the idle timeout.
var errIdle = errors.New("idle timeout")

// Join copies a→b and b→a until both directions end, and returns the byte
// counts of each. io.Copy between *net.TCPConn and *net.UnixConn uses
// splice(2), so bytes do not cross user space. An end of file half-closes the
// other side; an error, or idle (when > 0) with no traffic either way,
// closes both.
func Join(a, b net.Conn, idle time.Duration) (ab, ba int64) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ab = pump(b, a, idle, &last, a, b)
	}()
	ba = pump(a, b, idle, &last, a, b)
	wg.Wait()
	return ab, ba
}

// pump copies src to dst (see Join) and returns the bytes copied.
func pump(dst, src net.Conn, idle time.Duration, last *atomic.Int64, a, b net.Conn) int64 {
	n, err := copyIdle(dst, src, idle, last)
	if err != nil {
		_ = a.Close()
		_ = b.Close()
		return n
	}
	if hc, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = hc.CloseWrite()
	} else {
		_ = dst.Close()
	}
	return n
}

// copyIdle copies src to dst until EOF (nil), an error, or idle with no
// traffic either way (errIdle). Only read deadlines are used: splice(2) loses
// what is in its pipe when a write deadline strikes, never when a read one
// does.
func copyIdle(dst, src net.Conn, idle time.Duration, last *atomic.Int64) (int64, error) {
	if idle <= 0 {
		return io.Copy(dst, src)
	}
	tick := min(idle/4, maxTick)
	var total int64
	for {
		_ = src.SetReadDeadline(time.Now().Add(tick))
		n, err := io.Copy(dst, src)
		total += n
		now := time.Now()
		if n > 0 {
			last.Store(now.UnixNano())
		}
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			return total, err
		}
		if now.Sub(time.Unix(0, last.Load())) >= idle {
			return total, errIdle
		}
	}
}

package inside

import (
	"bytes"
	"testing"
	"time"
)

// readAll follows r from offset 0 to its end the way follow does, taking
// each batch slowly (a caller under load), and returns what it read and how
// much it missed.
func readAll(r *ring, hold bool) (got []byte, missed int64) {
	if hold {
		defer r.release()
	}
	var off int64
	for {
		chunks, m, next, ended, changed := r.readFrom(off)
		missed += m
		for _, c := range chunks {
			got = append(got, c.data...)
		}
		time.Sleep(time.Millisecond)
		off = next
		if hold {
			r.took(off)
		}
		if ended {
			return got, missed
		}
		<-changed
	}
}

// TestRingHeld: a held ring (a foreground exec's) makes its writer wait for
// a slow holder, which misses nothing; an unheld ring (a background
// command's) never waits and drops the oldest output; a holder that lets go
// lets a waiting writer on.
func TestRingHeld(t *testing.T) {
	const capacity, writes, size = 1 << 10, 64, 100
	want := bytes.Repeat([]byte("0123456789"), writes*size/10)
	for _, tc := range []struct {
		name       string
		held       bool
		wantMissed bool
	}{
		{"Held", true, false},
		{"NotHeld", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRing(capacity, tc.held)
			go func() {
				for i := range writes {
					r.write(1, want[i*size:(i+1)*size])
				}
				r.end()
			}()
			got, missed := readAll(r, tc.held)
			if tc.wantMissed {
				if missed == 0 || int64(len(got))+missed != int64(len(want)) || !bytes.HasSuffix(want, got) {
					t.Fatalf("read %d bytes, missed %d, want the last bytes of %d and the rest missed", len(got), missed, len(want))
				}
				return
			}
			if missed != 0 || !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes, missed %d, want all %d", len(got), missed, len(want))
			}
		})
	}
	t.Run("Released", func(t *testing.T) {
		r := newRing(capacity, true)
		wrote := make(chan struct{})
		go func() {
			for i := range writes {
				r.write(1, want[i*size:(i+1)*size])
			}
			close(wrote)
		}()
		select {
		case <-wrote:
			t.Fatal("the writer filled a held ring past its capacity with no reader")
		case <-time.After(50 * time.Millisecond):
		}
		r.release()
		select {
		case <-wrote:
		case <-time.After(10 * time.Second):
			t.Fatal("the writer still waits after the holder let go")
		}
	})
}

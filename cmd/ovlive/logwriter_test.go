package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"openvibe.network/agentsandbox/internal/syncbuf"
)

// TestLogWriter: every line written reaches the log whole and in each
// writer's order, by Close at the latest.
func TestLogWriter(t *testing.T) {
	var out syncbuf.Buffer
	l := newLogWriter(&out)
	const writers, lines = 8, 2000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				fmt.Fprintf(l, "{\"w\":%d,\"i\":%d,\"pad\":%q}\n", w, i, strings.Repeat("x", i%100))
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	next := make([]int, writers)
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines, want %d", len(got), writers*lines)
	}
	for _, line := range got {
		var w, i int
		if _, err := fmt.Sscanf(line, "{\"w\":%d,\"i\":%d,", &w, &i); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if i != next[w] || !strings.HasSuffix(line, fmt.Sprintf("%q}", strings.Repeat("x", i%100))) {
			t.Fatalf("writer %d: line %q, want its line %d whole", w, line, next[w])
		}
		next[w]++
	}
}

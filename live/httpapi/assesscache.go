package httpapi

import (
	"hash/maphash"
	"sync"

	"openvibe.network/agentsandbox/live"
)

// assessCacheSize bounds the assessment cache.
const assessCacheSize = 10000

// assessCache keeps whether recent reports were degraded (live.Assess), by
// a hash of their bytes, so that a worker sending the same report again
// costs one hash instead of decoding it. A worker's report changes at
// every check-in in practice (its time), so the cache matters only when
// many identical reports arrive (a load test), and a full cache is simply
// emptied. Safe for concurrent use.
type assessCache struct {
	seed maphash.Seed
	mu   sync.Mutex
	m    map[uint64]bool
}

func newAssessCache() *assessCache {
	return &assessCache{seed: maphash.MakeSeed(), m: map[uint64]bool{}}
}

// degraded reports whether report shows a problem (live.Assess).
func (c *assessCache) degraded(report []byte) bool {
	h := maphash.Bytes(c.seed, report)
	c.mu.Lock()
	d, ok := c.m[h]
	c.mu.Unlock()
	if ok {
		return d
	}
	d = live.Assess(report).Degraded
	c.mu.Lock()
	if len(c.m) >= assessCacheSize {
		clear(c.m)
	}
	c.m[h] = d
	c.mu.Unlock()
	return d
}

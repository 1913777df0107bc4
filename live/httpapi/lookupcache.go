package httpapi

import (
	"sync"
	"time"

	"openvibe.network/agentsandbox/live"
)

// Bounds of the check-in lookup cache.
const (
	lookupCacheSize = 10000
	lookupCacheTTL  = time.Minute
)

// lookupCache keeps the store's answers to the check-in lookups that
// authorised a check-in, so that a worker checking in again costs no read.
// It never decides on its own: an answer is used only at the auth epoch it
// was read at (live.CheckInLookup.Epoch), which the check-in's write checks
// in its own transaction (live.Registration.AuthEpoch); when the epoch has
// moved, the check-in is looked up again. Expiry is decided from the kept
// answer at each request. Safe for concurrent use.
type lookupCache struct {
	mu sync.Mutex
	m  map[lookupKey]cachedLookup
}

// lookupKey is what a check-in presented: the credential's hash, the
// stream, the subject.
type lookupKey struct {
	hash            [32]byte
	stream, subject string
}

type cachedLookup struct {
	l  live.CheckInLookup
	at time.Time
}

func newLookupCache() *lookupCache { return &lookupCache{m: map[lookupKey]cachedLookup{}} }

// get returns the answer kept for k, if one younger than lookupCacheTTL is.
func (c *lookupCache) get(k lookupKey, now time.Time) (live.CheckInLookup, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || now.Sub(e.at) >= lookupCacheTTL || now.Before(e.at) {
		return live.CheckInLookup{}, false
	}
	return e.l, true
}

// put keeps l for k; a full cache is emptied first.
func (c *lookupCache) put(k lookupKey, l live.CheckInLookup, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= lookupCacheSize {
		clear(c.m)
	}
	c.m[k] = cachedLookup{l: l, at: now}
}

// drop forgets k.
func (c *lookupCache) drop(k lookupKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

// used notes that the credential kept for k was recorded as used at at.
func (c *lookupCache) used(k lookupKey, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok && e.l.Credential != nil {
		cred := *e.l.Credential
		cred.LastUsedAt = &at
		e.l.Credential = &cred
		c.m[k] = e
	}
}

package identity

import (
	"sync"

	"github.com/cespare/xxhash/v2"

	"github.com/condense-dev/condense/internal/wire"
)

// hashCache memoises MessageHash by the message's exact bytes, so messages parsed anew with
// unchanged bytes cost one xxhash pass. Safe for concurrent use.
type hashCache struct {
	mu  sync.Mutex
	max int
	m   map[cacheKey]string
}

type cacheKey struct {
	sum uint64
	n   int
}

// newHashCache returns a cache holding at most max entries; when full it starts over.
func newHashCache(max int) *hashCache {
	if max < 1 {
		max = 1
	}
	return &hashCache{max: max, m: make(map[cacheKey]string)}
}

// MessageHash returns identity.MessageHash(m), from the cache when the same bytes were
// hashed before.
func (c *hashCache) MessageHash(m *wire.Message) string {
	raw := m.Bytes()
	k := cacheKey{sum: xxhash.Sum64(raw), n: len(raw)}
	c.mu.Lock()
	h, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return h
	}
	h = messageHash(m)
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = h
	c.mu.Unlock()
	return h
}

// Fingerprints is identity.Fingerprints using the cache.
func (c *hashCache) Fingerprints(msgs []*wire.Message) []Fingerprint {
	out := make([]Fingerprint, len(msgs))
	seen := make(map[string]int, len(msgs))
	for i, m := range msgs {
		h := c.MessageHash(m)
		out[i] = Fingerprint{Hash: h, Ordinal: seen[h]}
		seen[h]++
	}
	return out
}

// fingerprintsReusing returns Fingerprints(msgs), taking prevFps = Fingerprints(prev) over
// for the leading messages msgs shares with prev (the same *wire.Message values, as
// wire.ParseReusing shares them) and hashing only the rest.
func fingerprintsReusing(msgs, prev []*wire.Message, prevFps []Fingerprint) []Fingerprint {
	n := 0
	for n < len(msgs) && n < len(prev) && n < len(prevFps) && msgs[n] == prev[n] {
		n++
	}
	out := make([]Fingerprint, len(msgs))
	copy(out, prevFps[:n])
	seen := make(map[string]int, len(msgs))
	for _, f := range out[:n] {
		seen[f.Hash]++
	}
	for i := n; i < len(msgs); i++ {
		h := MessageHash(msgs[i])
		out[i] = Fingerprint{Hash: h, Ordinal: seen[h]}
		seen[h]++
	}
	return out
}

package proxy

import (
	"sync"
	"sync/atomic"
)

// boundedMap is a concurrent map (sync.Map, typed) that starts over empty once the writes it
// counts pass max; it bounds the per-session memory of this process.
type boundedMap[K comparable, V any] struct {
	m   sync.Map
	n   atomic.Int64 // counted writes since the map last started over
	max int64
}

func newBoundedMap[K comparable, V any](max int) *boundedMap[K, V] {
	return &boundedMap[K, V]{max: int64(max)}
}

// Load returns the value of k.
func (b *boundedMap[K, V]) Load(k K) (v V, ok bool) {
	x, ok := b.m.Load(k)
	if ok {
		v = x.(V)
	}
	return v, ok
}

// Swap sets k to v. A new key counts; the one past max empties the map, v with it.
func (b *boundedMap[K, V]) Swap(k K, v V) {
	if _, had := b.m.Swap(k, v); !had {
		b.added()
	}
}

// LoadOrStore returns the value of k when it has one, else sets it to v, counted as Swap counts.
func (b *boundedMap[K, V]) LoadOrStore(k K, v V) (actual V, loaded bool) {
	x, loaded := b.m.LoadOrStore(k, v)
	if !loaded {
		b.added()
		return v, false
	}
	return x.(V), true
}

// Store sets k to v. Every Store counts, new key or not; the one past max empties the map
// first, so v stays.
func (b *boundedMap[K, V]) Store(k K, v V) {
	if b.n.Add(1) > b.max {
		b.m.Clear()
		b.n.Store(1)
	}
	b.m.Store(k, v)
}

// CompareAndSwap sets k to new if its value is old (V must be comparable at run time).
func (b *boundedMap[K, V]) CompareAndSwap(k K, old, new V) bool {
	return b.m.CompareAndSwap(k, old, new)
}

// added counts a new key and starts the map over when it passes max.
func (b *boundedMap[K, V]) added() {
	if b.n.Add(1) > b.max {
		b.m.Clear()
		b.n.Store(0)
	}
}

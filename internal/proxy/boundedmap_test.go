package proxy

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// Delete removes k (tests only: the proxy never removes an entry).
func (b *boundedMap[K, V]) Delete(k K) { b.m.Delete(k) }

// entries returns the keys a boundedMap holds, sorted.
func entries(b *boundedMap[string, int]) []string {
	var keys []string
	b.m.Range(func(k, _ any) bool { keys = append(keys, k.(string)); return true })
	slices.Sort(keys)
	return keys
}

// TestBoundedMap: each write counts as its cache counted it before the type existed — Swap
// and LoadOrStore a new key, emptying the map (the new entry included) past max; Store every
// write, emptying the map first and keeping the new entry.
func TestBoundedMap(t *testing.T) {
	type op struct {
		kind string // swap, store, loadOrStore, cas, delete
		k    string
		v    int
		old  int // cas: the expected value
	}
	for _, tc := range []struct {
		name string
		ops  []op
		want []string
		n    int64 // the count afterwards
	}{
		{"swap counts new keys only", []op{{kind: "swap", k: "a"}, {kind: "swap", k: "a", v: 1}, {kind: "swap", k: "b"}}, []string{"a", "b"}, 2},
		{"swap past max empties the map, the new key with it", []op{{kind: "swap", k: "a"}, {kind: "swap", k: "b"}, {kind: "swap", k: "c"}, {kind: "swap", k: "d"}}, nil, 0},
		{"swap after starting over counts from zero", []op{{kind: "swap", k: "a"}, {kind: "swap", k: "b"}, {kind: "swap", k: "c"}, {kind: "swap", k: "d"}, {kind: "swap", k: "e"}}, []string{"e"}, 1},
		{"loadOrStore counts a stored key", []op{{kind: "loadOrStore", k: "a"}, {kind: "loadOrStore", k: "a", v: 5}, {kind: "loadOrStore", k: "b"}}, []string{"a", "b"}, 2},
		{"loadOrStore past max empties the map", []op{{kind: "loadOrStore", k: "a"}, {kind: "loadOrStore", k: "b"}, {kind: "loadOrStore", k: "c"}, {kind: "loadOrStore", k: "d"}}, nil, 0},
		{"store counts every write", []op{{kind: "store", k: "a"}, {kind: "store", k: "a"}, {kind: "store", k: "a"}}, []string{"a"}, 3},
		{"store past max keeps the new entry", []op{{kind: "store", k: "a"}, {kind: "store", k: "b"}, {kind: "store", k: "c"}, {kind: "store", k: "d"}}, []string{"d"}, 1},
		{"store past max by overwrites", []op{{kind: "store", k: "a"}, {kind: "store", k: "b"}, {kind: "store", k: "b"}, {kind: "store", k: "b"}}, []string{"b"}, 1},
		{"cas and delete count nothing", []op{{kind: "swap", k: "a", v: 1}, {kind: "cas", k: "a", old: 1, v: 2}, {kind: "cas", k: "a", old: 1, v: 3}, {kind: "delete", k: "a"}, {kind: "swap", k: "b"}}, []string{"b"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBoundedMap[string, int](3)
			for _, o := range tc.ops {
				switch o.kind {
				case "swap":
					b.Swap(o.k, o.v)
				case "store":
					b.Store(o.k, o.v)
				case "loadOrStore":
					b.LoadOrStore(o.k, o.v)
				case "cas":
					b.CompareAndSwap(o.k, o.old, o.v)
				case "delete":
					b.Delete(o.k)
				}
			}
			if got := entries(b); !slices.Equal(got, tc.want) || b.n.Load() != tc.n {
				t.Fatalf("holds %v counted %d; want %v counted %d", got, b.n.Load(), tc.want, tc.n)
			}
		})
	}
}

// TestBoundedMapValues: Load, LoadOrStore and CompareAndSwap return and set the typed values.
func TestBoundedMapValues(t *testing.T) {
	b := newBoundedMap[string, int](10)
	if _, ok := b.Load("a"); ok {
		t.Fatal("an empty map loaded a value")
	}
	if v, loaded := b.LoadOrStore("a", 1); loaded || v != 1 {
		t.Fatalf("LoadOrStore of a new key = %d, %v", v, loaded)
	}
	if v, loaded := b.LoadOrStore("a", 2); !loaded || v != 1 {
		t.Fatalf("LoadOrStore of a held key = %d, %v", v, loaded)
	}
	if b.CompareAndSwap("a", 2, 3) {
		t.Fatal("CompareAndSwap with a wrong old value swapped")
	}
	if !b.CompareAndSwap("a", 1, 3) {
		t.Fatal("CompareAndSwap with the held value did not swap")
	}
	if v, ok := b.Load("a"); !ok || v != 3 {
		t.Fatalf("Load = %d, %v; want 3", v, ok)
	}
}

// TestBoundedMapConcurrent: concurrent writers (run with -race) never leave more than max
// entries plus one per writer (a key written while another writer starts the map over).
func TestBoundedMapConcurrent(t *testing.T) {
	const max, writers, each = 50, 8, 2000
	b := newBoundedMap[string, int](max)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				k := fmt.Sprintf("%d-%d", w, i%200)
				switch i % 3 {
				case 0:
					b.Swap(k, i)
				case 1:
					if v, loaded := b.LoadOrStore(k, i); loaded {
						b.CompareAndSwap(k, v, i)
					}
				default:
					b.Store(k, i)
				}
				b.Load(k)
			}
		}()
	}
	wg.Wait()
	if n := len(entries(b)); n > max+writers {
		t.Fatalf("%d entries after concurrent writes; want at most %d", n, max+writers)
	}
}

package wire

import (
	"sync"
	"unsafe"
)

// stacks are the working stacks of a parser, which later parses reuse (stackPool).
type stacks struct {
	blk  []*Block
	span []span
	msg  []*Message
}

var stackPool = sync.Pool{New: func() any { return new(stacks) }}

// put returns p's stacks to the pool, emptied (their values no longer pinned), unless they
// grew past 64Ki entries.
func (s *stacks) put(p *parser) {
	const most = 1 << 16
	if cap(p.blkStack) > most || cap(p.spanStack) > most || cap(p.msgStack) > most {
		return
	}
	clear(p.blkStack[:cap(p.blkStack)])
	clear(p.msgStack[:cap(p.msgStack)])
	s.blk, s.span, s.msg = p.blkStack[:0], p.spanStack[:0], p.msgStack[:0]
	stackPool.Put(s)
}

// slab hands out values of T from chunks allocated for many at a time.
type slab[T any] struct {
	free []T
	n    int // values in the chunks allocated so far
}

// take returns the next value of s, allocating a chunk (see parser.chunk; n is the first
// chunk's size in a large body) when s is used up.
func take[T any](p *parser, s *slab[T], n int) *T {
	if len(s.free) == 0 {
		c := newSlab[T](p, p.chunk(n, s.n))
		s.n += len(c)
		s.free = c
	}
	v := &s.free[0]
	s.free = s.free[1:]
	return v
}

// chunk is the size of the next slab chunk after taken values, n values for the first chunk;
// a reusing parse's values get an allocation each, so that none pins a value it dropped
// (docs/design/wire.md, "Parse memory").
func (p *parser) chunk(n, taken int) int {
	if p.prev != nil {
		return 1
	}
	rest := len(p.d) - p.at
	if taken == 0 || p.at <= 0 {
		return max(8, min(n, len(p.d)/8))
	}
	want := taken * rest / p.at
	return max(8, min(want+want/16+8, taken, rest/8))
}

// newSlab allocates a slab of n values, counted in the parse's memory.
func newSlab[T any](p *parser, n int) []T {
	var zero T
	p.keep(n * int(unsafe.Sizeof(zero)))
	return make([]T, n)
}

func (p *parser) newMessage() *Message {
	m := take(p, &p.msgs, 64)
	m.f = p.f
	return m
}

func (p *parser) newBlock() *Block {
	b := take(p, &p.blocks, 128)
	b.f = p.f
	return b
}

// blockSlice copies bs into slab memory (nil when empty).
func (p *parser) blockSlice(bs []*Block) []*Block {
	if len(bs) == 0 {
		return nil
	}
	return slabCopy(p, &p.blocksSlab, bs, 512)
}

// slabCopy copies s into the slab memory *free, first refilled with a chunk (n values for the
// first) when short; capacity == length, so appends by callers copy.
func slabCopy[T any](p *parser, free *[]T, s []T, n int) []T {
	if len(*free) < len(s) {
		*free = newSlab[T](p, max(p.chunk(n, 0), len(s)))
	}
	out := (*free)[:len(s):len(s)]
	copy(out, s)
	*free = (*free)[len(s):]
	return out
}

package wire

import (
	"slices"
	"unsafe"
)

// Where each parsed value lives, for RetainedBytes (docs/design/wire.md, "Memory").

// backing is the memory one parse allocated that its values keep alive, in bytes.
type backing struct{ n int }

// homeRun says that the messages before index end, from the previous run's end, live in b.
type homeRun struct {
	end int
	b   *backing
}

// RetainedBytes returns about how many bytes of memory r keeps alive: its body and the memory
// of every parse whose values it holds, computed when r was parsed; requests of one
// conversation share memory (docs/design/wire.md, "Memory").
func (r *Request) RetainedBytes() int { return r.retained }

// messageHomes returns the runs of a request whose first reused messages (of n) are the
// previous request's and the rest this parse's.
func (p *parser) messageHomes(reused, n int) []homeRun {
	if n == 0 {
		return nil
	}
	var prevRuns []homeRun
	if reused > 0 {
		prevRuns = p.prev.msgHomes
	}
	runs := make([]homeRun, 0, len(prevRuns)+1)
	for _, h := range prevRuns {
		runs = append(runs, homeRun{min(h.end, reused), h.b})
		if h.end >= reused {
			break
		}
	}
	if n > reused {
		runs = append(runs, homeRun{n, p.home})
	}
	return runs
}

// toolHomes returns where each tool of a request lives: a tool shared with the previous
// request (prevTools) where it lived there, the others in this parse's memory.
func (p *parser) toolHomes(tools, prevTools []*Tool) []*backing {
	if len(tools) == 0 {
		return nil
	}
	homes := make([]*backing, len(tools))
	for i, t := range tools {
		homes[i] = p.home
		if i < len(prevTools) && t == prevTools[i] {
			homes[i] = p.prev.toolHomes[i] // a parsed request has one home per parsed tool
		}
	}
	return homes
}

// countRetained computes RetainedBytes for a request just parsed by a parse whose memory is
// own: a whole parse's backing holds the body, a reusing parse's does not.
func (r *Request) countRetained(own *backing, whole bool) int {
	n := own.n
	if !whole {
		n += cap(r.body) // r keeps its body (all of its array) through its top-level object
	}
	// r's own lists of its values, the spans of its messages and tools arrays and the index
	// of its top-level object.
	ptr := int(unsafe.Sizeof(own))
	n += ptr * (cap(r.Messages) + cap(r.origMessages) + cap(r.Tools) + cap(r.origTools) + cap(r.toolHomes))
	n += int(unsafe.Sizeof(homeRun{})) * cap(r.msgHomes)
	n += int(unsafe.Sizeof(member{})) * cap(r.members)
	for _, a := range []*array{r.msgsArr, r.toolsArr} {
		if a != nil {
			n += int(unsafe.Sizeof(span{})) * cap(a.spans)
		}
	}
	// A parse's backing is new, and the runs of shared messages keep their order, so the
	// message runs name distinct backings. Tools and the system may live in any of them.
	for _, h := range r.msgHomes {
		if h.b != own {
			n += h.b.n
		}
	}
	counted := func(b *backing, tools []*backing) bool {
		return b == nil || b == own || slices.Contains(tools, b) ||
			slices.ContainsFunc(r.msgHomes, func(h homeRun) bool { return h.b == b })
	}
	for i, b := range r.toolHomes {
		if (i == 0 || b != r.toolHomes[i-1]) && !counted(b, r.toolHomes[:i]) {
			n += b.n
		}
	}
	if !counted(r.sysHome, r.toolHomes) {
		n += r.sysHome.n
	}
	return n
}

// keep counts n more bytes of memory that the parse's values keep alive.
func (p *parser) keep(n int) {
	if p.home != nil {
		p.home.n += n
	}
}

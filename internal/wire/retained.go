package wire

import "unsafe"

// Memory a parsed request keeps alive.
//
// A request keeps its own body. Its messages, tools and system value live in the memory of
// the parse that made them: a whole parse's body, with its arena and slab chunks; or what a
// reusing parse allocated for the values it parsed anew (the copies detach made, the arena
// and slab chunks; see reuse.go). ParseReusing shares values with the previous request, so a
// request also keeps the memory of every earlier parse whose values it still shares — above
// all the body of the session's last whole parse, whose messages every later request shares.
// Each parse records its memory in one backing, and the request records, beside its values,
// which backing each lives in (the values themselves stay as a fresh parse makes them).

// backing is the memory one parse allocated that its values keep alive, in bytes.
type backing struct{ n int }

// homeRun says that the messages before index end, from the previous run's end, live in b.
type homeRun struct {
	end int
	b   *backing
}

// RetainedBytes returns about how many bytes of memory r keeps alive: its body and the
// memory of every parse whose messages, tools or system value it holds (bodies, copies of
// values, decoded strings, parsed values), computed when r was parsed. Requests of one
// conversation share memory, so a sum over several of them counts shared memory more than
// once; over requests of different conversations it is their total. Not counted: what callers
// attach to its values (memos) and small fixed-size parts.
func (r *Request) RetainedBytes() int { return r.retained }

// messageHomes returns the runs of a request whose first reused messages (of n) are the
// previous request's and the rest this parse's.
func (p *parser) messageHomes(reused, n int) []homeRun {
	var runs []homeRun
	if reused > 0 {
		for _, h := range p.prev.msgHomes {
			if h.end >= reused {
				runs = append(runs, homeRun{reused, h.b})
				break
			}
			runs = append(runs, h)
		}
	}
	if n > reused {
		runs = append(runs, homeRun{n, p.home})
	}
	return runs
}

// toolHome returns the backing of r's tool i (nil when unknown).
func (r *Request) toolHome(i int) *backing {
	if i < len(r.toolHomes) {
		return r.toolHomes[i]
	}
	return nil
}

// countRetained computes RetainedBytes for a request just parsed by a parse whose memory is
// own: a whole parse's backing holds the body, a reusing parse's does not.
func (r *Request) countRetained(own *backing, whole bool) int {
	n := 0
	if !whole {
		n += cap(r.body) // r keeps its body (all of its array) through its top-level object
	}
	// r's own lists of its values.
	n += int(unsafe.Sizeof((*Message)(nil))) * (cap(r.Messages) + cap(r.origMessages))
	n += int(unsafe.Sizeof((*Tool)(nil))) * (cap(r.Tools) + cap(r.origTools))
	n += int(unsafe.Sizeof(homeRun{}))*cap(r.msgHomes) + int(unsafe.Sizeof(own))*cap(r.toolHomes)
	// The backings counted so far. A parse's backing is new, and the runs of shared messages
	// keep their order, so the message runs name distinct backings.
	seen := make([]*backing, 0, len(r.msgHomes)+2)
	count := func(b *backing) {
		if b == nil {
			return
		}
		for _, s := range seen {
			if s == b {
				return
			}
		}
		seen = append(seen, b)
		n += b.n
	}
	count(own)
	for _, h := range r.msgHomes {
		if h.b != own {
			seen = append(seen, h.b)
			n += h.b.n
		}
	}
	var last *backing
	for _, b := range r.toolHomes {
		if b != last {
			last = b
			count(b)
		}
	}
	count(r.sysHome)
	return n
}

// keep counts n more bytes of memory that the parse's values keep alive.
func (p *parser) keep(n int) {
	if p.home != nil {
		p.home.n += n
	}
}

package proxy

import (
	"container/list"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/wire"
)

// DefaultParseCacheBytes bounds the memory the requests the proxy remembers keep alive, one per
// session, to parse the next request against (see parseCache).
const DefaultParseCacheBytes = config.DefaultParseCacheBytes

// parseCache remembers each session's last parsed request, for wire.ParseReusing: an LRU
// bounded by the memory the remembered requests keep alive (wire.Request.RetainedBytes).
// An entry can change a parse's cost, never its result.
type parseCache struct {
	mu    sync.Mutex
	max   int
	size  int
	order *list.List // front = most recently used; values are *parseEntry
	byKey map[parseKey]*list.Element
}

type parseKey struct {
	f   wire.Format
	sid string
}

type parseEntry struct {
	key  parseKey
	req  *wire.Request
	size int
}

func newParseCache(maxBytes int) *parseCache {
	return &parseCache{max: maxBytes, order: list.New(), byKey: map[parseKey]*list.Element{}}
}

// parse parses body, reusing the session's previous request when one is remembered.
func (c *parseCache) parse(f wire.Format, sid string, body []byte) (*wire.Request, error) {
	if c == nil || c.max <= 0 {
		return wire.Parse(f, body)
	}
	return wire.ParseReusing(f, body, c.get(f, sid))
}

// peek returns the session's remembered request without counting it as used (background
// work must not keep a session in the cache).
func (c *parseCache) peek(f wire.Format, sid string) *wire.Request {
	if c == nil || c.max <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[parseKey{f, sid}]; ok {
		return e.Value.(*parseEntry).req
	}
	return nil
}

func (c *parseCache) get(f wire.Format, sid string) *wire.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[parseKey{f, sid}]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*parseEntry).req
	}
	return nil
}

// put remembers req as the session's latest request. Requests that keep more than the whole
// budget alive are not remembered, and the session's earlier request is forgotten.
func (c *parseCache) put(f wire.Format, sid string, req *wire.Request) {
	if c == nil || c.max <= 0 {
		return
	}
	n := req.RetainedBytes()
	k := parseKey{f, sid}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n > c.max {
		// Not remembered; nor is the session's earlier request, which no longer matches.
		if e, ok := c.byKey[k]; ok {
			c.remove(e)
		}
		return
	}
	if e, ok := c.byKey[k]; ok {
		pe := e.Value.(*parseEntry)
		c.size += n - pe.size
		pe.req, pe.size = req, n
		c.order.MoveToFront(e)
	} else {
		c.byKey[k] = c.order.PushFront(&parseEntry{key: k, req: req, size: n})
		c.size += n
	}
	for c.size > c.max {
		c.remove(c.order.Back())
	}
}

// remove forgets the entry e (c.mu held).
func (c *parseCache) remove(e *list.Element) {
	pe := e.Value.(*parseEntry)
	c.order.Remove(e)
	delete(c.byKey, pe.key)
	c.size -= pe.size
}

// len returns the number of remembered sessions and the bytes they keep alive.
func (c *parseCache) len() (sessions, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len(), c.size
}

// collectors returns the cache's gauges: condense_parse_cache_sessions and
// condense_parse_cache_bytes.
func (c *parseCache) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "condense_parse_cache_sessions",
			Help: "Sessions whose last request the proxy remembers, to parse only what their next request adds."},
			func() float64 { n, _ := c.len(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "condense_parse_cache_bytes",
			Help: "Memory the remembered requests keep alive (bodies, copies of their messages, decoded strings, parsed values), bounded by limits.parseCacheBytes."},
			func() float64 { _, n := c.len(); return float64(n) }),
	}
}

package proxy

import (
	"context"
	"time"

	"github.com/condense-dev/condense/internal/store"
)

// Counter names the proxy keeps in the store besides the store.Stat* ones.
const (
	statLastTokens     = "proxyLastTokens"     // estimated tokens of the last forwarded request
	statFlushRequested = "proxyFlushRequested" // admin flush requests
	statFlushServed    = "proxyFlushServed"    // admin flush requests started
	statFailOpen       = "proxyFailOpen"
	statRecoveries     = "proxyRecoveryRounds"
	statDeferred       = "proxyDeferredQueries"
	statLastRequestMs  = "proxyLastRequestMs"   // unix ms of the last forwarded request (the prompt cache's last write)
	statLastMessages   = "proxyLastMessages"    // message count of the last forwarded request
	statContextReqs    = "proxyContextRequests" // requests since the session start or its last compaction
)

// contextRequests counts the requests of the session's current context including this one:
// it starts over when the message count drops (the client compacted its context).
func (s *Server) contextRequests(t *turn) int {
	if t.snap == nil || contextStartsOver(t) {
		return 1
	}
	return int(t.snap.Stats[statContextReqs]) + 1
}

// contextStartsOver reports whether the request has fewer messages than the session's
// previous one: the client compacted its context, and the count of its requests starts over.
func contextStartsOver(t *turn) bool {
	return int64(len(t.client.Messages)) < t.snap.Stats[statLastMessages]
}

// sessionStats counts the request's usage in the metrics and returns its session counters
// (nil when the request is not recorded in the session): what it adds, the last values it
// sets, and the times it raises.
func (s *Server) sessionStats(t *turn, u usage) *store.StatsUpdate {
	s.met.UsageTokens.WithLabelValues("input").Add(float64(u.input))
	s.met.UsageTokens.WithLabelValues("output").Add(float64(u.output))
	s.met.UsageTokens.WithLabelValues("cache_read").Add(float64(u.cacheRead))
	s.met.UsageTokens.WithLabelValues("cache_creation").Add(float64(u.cacheCreation))
	if s.opt.Store == nil || t.ep.countsTokens() || t.open == "session-id" || t.opening {
		return nil
	}
	before, after := len(t.client.Raw()), t.body.Len()
	st := &store.StatsUpdate{Incr: map[string]int64{
		store.StatRequests:         1,
		store.StatBytesBefore:      int64(before),
		store.StatBytesAfter:       int64(after),
		store.StatTokensBefore:     int64(estimateTokens(before)),
		store.StatTokensAfter:      int64(estimateTokens(after)),
		store.StatCacheReadTokens:  int64(u.cacheRead),
		store.StatCacheWriteTokens: int64(u.cacheCreation),
		"inputTokens":              int64(u.input),
		"outputTokens":             int64(u.output),
	}}
	if t.open != "" {
		st.Incr[statFailOpen] = 1
	}
	if t.snap != nil && !t.side {
		// Nothing read from this request's snapshot is written back (another request may have
		// written since): last values are set, the context's request count incremented (1
		// where the context starts over), the last request time only ever raised.
		st.Set = map[string]int64{
			statLastTokens:   int64(estimateTokens(after)),
			statLastMessages: int64(len(t.client.Messages)),
		}
		if contextStartsOver(t) {
			st.Set[statContextReqs] = 1
		} else {
			st.Incr[statContextReqs] = 1
		}
		st.Max = map[string]int64{statLastRequestMs: t.at.UnixMilli()}
	}
	return st
}

// storeStats writes a request's session counters in one store call (one round trip).
func (s *Server) storeStats(ctx context.Context, t *turn, st *store.StatsUpdate) {
	start := time.Now()
	err := s.opt.Store.UpdateStats(ctx, t.sid, *st)
	s.met.StoreSeconds.WithLabelValues("update_stats").Observe(time.Since(start).Seconds())
	if err != nil {
		s.met.StoreErrors.WithLabelValues("update_stats").Inc()
		t.log.Warn("recording stats failed", "err", err)
	}
}

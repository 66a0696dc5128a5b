package summarize

import "time"

// InFallback reports whether calls currently go to the session's own model.
func (c *FallbackController) InFallback() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFallback
}

// Reset clears all state (primary again, nothing owed).
func (c *FallbackController) Reset() {
	c.mu.Lock()
	c.inFallback, c.lastProbeAt, c.owedEnter = false, time.Time{}, false
	c.mu.Unlock()
}

package flush

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/condense-dev/condense/internal/summarize"
)

// maxMemo bounds the orchestrator's summary memo; past it the memo starts over.
const maxMemo = 4096

func (o *Orchestrator) memoGet(session, key string) (string, bool) {
	o.memoMu.Lock()
	defer o.memoMu.Unlock()
	t, ok := o.memo[session+"\x00"+key]
	return t, ok
}

func (o *Orchestrator) memoPut(session, key, text string) {
	o.memoMu.Lock()
	defer o.memoMu.Unlock()
	if o.memo == nil || len(o.memo) >= maxMemo {
		o.memo = map[string]string{}
	}
	o.memo[session+"\x00"+key] = text
}

func cacheKey(r *summarize.Request) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%s\x00%s\x00%d", r.Kind, r.System, r.Prompt, len(r.Parts))
	for _, p := range r.Parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

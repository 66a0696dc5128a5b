package pruner

// Private adapters for internal/identity, which is being written concurrently; they follow the contract in docs/dev/contracts.md and are replaced by the
// real packages once those land.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/condense-dev/condense/internal/wire"
)

// occurrenceKey mirrors identity.OccurrenceKey: "<id>#<8 hex>".
func occurrenceKey(id, tool string, input []byte, text string) string {
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	var c bytes.Buffer
	if json.Compact(&c, input) == nil {
		h.Write(c.Bytes())
	} else {
		h.Write(input)
	}
	h.Write([]byte{0})
	h.Write([]byte(text))
	var s [32]byte
	return id + "#" + hex.EncodeToString(h.Sum(s[:0])[:4])
}

// msgFingerprints mirrors identity.Fingerprints: content hash plus the ordinal among earlier
// messages of the list with the same hash.
func msgFingerprints(msgs []*wire.Message) []Fingerprint {
	out := make([]Fingerprint, len(msgs))
	seen := map[string]int{}
	for i, m := range msgs {
		sum := sha256.Sum256(m.Raw())
		h := hex.EncodeToString(sum[:12])
		out[i] = Fingerprint{Hash: h, Ordinal: seen[h]}
		seen[h]++
	}
	return out
}

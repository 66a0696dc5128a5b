// Package identity names tool-call occurrences (occurrence keys) and messages (fingerprints)
// without timestamps, which the provider wire formats do not carry. See docs/identity.md.
package identity

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/condense-dev/condense/internal/wire"
)

// KeySep separates the bare id from the content hash in an occurrence key.
const KeySep = "#"

func writeField(h interface{ Write([]byte) (int, error) }, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// OccurrenceKeyOf returns "<result.ID>#<8 hex>": 32 bits of a SHA-256 over call.Name, the
// canonical call.Input and result.ResultText(), length-prefixed (docs/identity.md); memoised
// and remembered on the result block for its call (wire.Block.PairMemo).
func OccurrenceKeyOf(call, result *wire.Block) string {
	if k, ok := result.PairMemo(call); ok {
		return k
	}
	var mk occKey
	if raw := result.Raw(); len(raw) > 0 {
		d := xxhash.New()
		_, _ = d.Write([]byte{byte(result.Format())})
		_, _ = d.Write(raw)
		mk = occMemoKey(call.Name, call.IdentitySum(), d.Sum64(), len(call.Input), -1-len(raw))
	} else { // a block made field by field: its fields are all there is
		mk = occMemoKey(call.Name, call.IdentitySum(), result.IdentitySum(), len(call.Input), result.ResultTextLen())
	}
	k := keyFor(result.ID, mk, func() [4]byte {
		bp := canonPool.Get().(*[]byte)
		text := result.AppendResultText((*bp)[:0])
		sum := occurrenceSum(call.Name, call.Input, unsafe.String(unsafe.SliceData(text), len(text)))
		putCanon(bp, text)
		return sum
	})
	result.SetPairMemo(call, k)
	return k
}

// keyFor formats the key of id whose memo key is mk; sum computes the hash part when
// the memo does not have it.
func keyFor(id string, mk occKey, sum func() [4]byte) string {
	keyMemo.mu.Lock()
	h, ok := keyMemo.m[mk]
	keyMemo.mu.Unlock()
	if !ok {
		h = sum()
		keyMemo.mu.Lock()
		if len(keyMemo.m) >= keyMemoMax {
			clear(keyMemo.m)
		}
		keyMemo.m[mk] = h
		keyMemo.mu.Unlock()
	}
	out := make([]byte, 0, len(id)+len(KeySep)+8)
	out = append(out, id...)
	out = append(out, KeySep...)
	out = hex.AppendEncode(out, h[:])
	return string(out)
}

// occurrenceSum is the SHA-256 part of an occurrence key (its first four bytes), computed
// without copying the fields.
func occurrenceSum(toolName string, input []byte, resultText string) [4]byte {
	h := sha256.New()
	h.Write([]byte("condense/occurrence/v1"))
	writeField(h, stringBytes(toolName))
	bp := canonPool.Get().(*[]byte)
	canon, ok := canonicalAppend((*bp)[:0], input, "")
	if !ok {
		canon = bytes.TrimSpace(input)
	}
	writeField(h, canon)
	if !ok {
		canon = *bp // input itself, which the pool must not hold
	}
	putCanon(bp, canon)
	writeField(h, stringBytes(resultText))
	var sum [sha256.Size]byte
	return [4]byte(h.Sum(sum[:0])[:4])
}

// stringBytes returns the bytes of s without copying, for read-only use (hashing).
func stringBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// canonPool holds buffers for canonical tool inputs and decoded result texts.
var canonPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// putCanon returns the buffer bp to canonPool, holding used (what was appended to it, maybe
// reallocated) unless that grew past 1 MiB.
func putCanon(bp *[]byte, used []byte) {
	if cap(used) <= 1<<20 {
		*bp = used[:0]
	}
	canonPool.Put(bp)
}

// keyMemoMax bounds the occurrence key memo (about 100 bytes an entry).
const keyMemoMax = 1 << 16

// keyMemo maps the xxhash of an occurrence's fields (plus their lengths) to its SHA-256
// prefix.
var keyMemo = struct {
	mu sync.Mutex
	m  map[occKey][4]byte
}{m: map[occKey][4]byte{}}

type occKey struct {
	sum              uint64
	nName, nIn, nRes int
}

// occMemoKey combines the tool name with the xxhash fingerprints of the input and the
// result (and all three lengths) into the memo key.
func occMemoKey(toolName string, inputSum, resultSum uint64, nIn, nRes int) occKey {
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[:8], inputSum)
	binary.LittleEndian.PutUint64(buf[8:], resultSum)
	d := xxhash.New()
	_, _ = d.WriteString(toolName)
	_, _ = d.Write([]byte{0})
	_, _ = d.Write(buf[:])
	return occKey{sum: d.Sum64(), nName: len(toolName), nIn: nIn, nRes: nRes}
}

// BareID returns the provider id of an occurrence key (the part before the last "#"), or
// the key itself when it has no hash suffix.
func BareID(key string) string {
	i := strings.LastIndex(key, KeySep)
	if i < 0 || len(key)-i-1 != 8 {
		return key
	}
	if _, err := hex.DecodeString(key[i+1:]); err != nil {
		return key
	}
	return key[:i]
}

// Fingerprint identifies a message in a transcript without timestamps.
type Fingerprint struct {
	Hash    string // MessageHash of the message
	Ordinal int    // number of earlier messages in the transcript with the same Hash
}

// String returns "hash:ordinal".
func (f Fingerprint) String() string { return f.Hash + ":" + strconv.Itoa(f.Ordinal) }

// MessageHash returns 16 hex of a SHA-256 over the message's role and its blocks in canonical
// JSON without cache_control (string content as one text block). It is memoised on the message
// (wire.Message.HashMemo) and by its format and bytes (bounded).
func MessageHash(m *wire.Message) string {
	if h, ok := m.HashMemo(); ok {
		return h
	}
	h := memoMessageHash(m)
	m.SetHashMemo(h)
	return h
}

// memoMessageHash is MessageHash through the process-wide memo.
func memoMessageHash(m *wire.Message) string {
	raw := m.Bytes()
	d := xxhash.New()
	d.Write([]byte{byte(m.Format())})
	d.Write(raw)
	k := occKey{sum: d.Sum64(), nName: -1, nIn: len(raw)}
	hashMemo.mu.Lock()
	h, ok := hashMemo.m[k]
	hashMemo.mu.Unlock()
	if ok {
		return h
	}
	h = messageHash(m)
	hashMemo.mu.Lock()
	if len(hashMemo.m) >= keyMemoMax {
		clear(hashMemo.m)
	}
	hashMemo.m[k] = h
	hashMemo.mu.Unlock()
	return h
}

// hashMemo maps an xxhash of a message's format and bytes to its MessageHash.
var hashMemo = struct {
	mu sync.Mutex
	m  map[occKey]string
}{m: map[occKey]string{}}

// messageHash computes MessageHash.
func messageHash(m *wire.Message) string {
	h := sha256.New()
	h.Write([]byte("condense/message/v1"))
	writeField(h, stringBytes(string(m.Role)))
	var buf []byte
	for _, b := range m.Blocks {
		buf = appendBlockIdentity(buf[:0], b)
		writeField(h, buf)
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:8])
}

// appendBlockIdentity appends the canonical content of a block without its cache_control
// member; string content is written as the text block it stands for.
func appendBlockIdentity(dst []byte, b *wire.Block) []byte {
	if b.IsStringForm() && b.Kind == wire.KindText {
		dst = append(dst, `{"text":`...)
		if out, ok := canonicalAppend(dst, b.Raw(), ""); ok { // the literal, without decoding it
			dst = out
		} else {
			dst = appendString(dst, stringBytes(b.Text()))
		}
		return append(dst, `,"type":"text"}`...)
	}
	out, ok := canonicalAppend(dst, b.Raw(), "cache_control")
	if !ok {
		return append(dst, bytes.TrimSpace(b.Raw())...)
	}
	return out
}

// Fingerprints returns the fingerprint of every message, in order.
func Fingerprints(msgs []*wire.Message) []Fingerprint {
	out := make([]Fingerprint, len(msgs))
	seen := make(map[string]int, len(msgs))
	for i, m := range msgs {
		h := MessageHash(m)
		out[i] = Fingerprint{Hash: h, Ordinal: seen[h]}
		seen[h]++
	}
	return out
}

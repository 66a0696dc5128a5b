package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"unicode/utf8"
)

// MaxSessionIDLen is the longest accepted session id, in bytes.
const MaxSessionIDLen = 16 << 10

// MaxBlobKeyLen is the longest accepted blob key, in bytes.
const MaxBlobKeyLen = 1024

// MaxNameLen is the longest accepted diagnostic key or kind and counter name, in bytes.
const MaxNameLen = 4096

// maxVerbatimIDLen is the longest id used verbatim inside Redis keys; longer ids are hashed.
const maxVerbatimIDLen = 128

// ValidateSessionID accepts any valid UTF-8 id of 1..MaxSessionIDLen bytes without control
// characters (so '{', '}', ':' and spaces are fine; backends encode them) and refuses everything
// else with a *SessionIDError.
func ValidateSessionID(id string) error {
	switch {
	case id == "":
		return &SessionIDError{Reason: "empty", Len: 0}
	case len(id) > MaxSessionIDLen:
		return &SessionIDError{Reason: fmt.Sprintf("longer than %d bytes", MaxSessionIDLen), Len: len(id)}
	case !utf8.ValidString(id):
		return &SessionIDError{Reason: "not valid UTF-8", Len: len(id)}
	}
	for i, r := range id {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return &SessionIDError{Reason: fmt.Sprintf("control character U+%04X at byte %d", r, i), Len: len(id)}
		}
	}
	return nil
}

// EncodeSessionID returns a valid session id as backend keys hold it: the id when it is at
// most 128 bytes of [A-Za-z0-9._-], else "~" and its hex SHA-256. The forms never collide and
// never contain '{', '}' or ':' (safe in a Redis Cluster hash tag).
func EncodeSessionID(id string) string {
	if len(id) <= maxVerbatimIDLen && verbatimSafe(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "~" + hex.EncodeToString(sum[:])
}

func verbatimSafe(id string) bool {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func validateBlobKey(key string) error {
	if key == "" || len(key) > MaxBlobKeyLen {
		return invalidArg("blob key must be 1..%d bytes, got %d", MaxBlobKeyLen, len(key))
	}
	return nil
}

func validateDiagnostic(d Diagnostic) error {
	if d.Key == "" {
		return invalidArg("diagnostic with empty key (kind %q)", d.Kind)
	}
	if d.Kind == "" {
		return invalidArg("diagnostic %q with empty kind", d.Key)
	}
	if len(d.Key) > MaxNameLen || len(d.Kind) > MaxNameLen {
		return invalidArg("diagnostic key or kind longer than %d bytes", MaxNameLen)
	}
	return nil
}

func validateCounterName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return invalidArg("counter name must be 1..%d bytes, got %d", MaxNameLen, len(name))
	}
	return nil
}

package store

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCodecFraming(t *testing.T) {
	text := []byte(strings.Repeat("the same line of tool output\n", 100))
	enc := encodeValue(text)
	if enc[0] != codecZstd || len(enc) >= len(text) {
		t.Fatalf("compressible value stored with codec %d, %d bytes", enc[0], len(enc))
	}
	if small := encodeValue([]byte("short")); small[0] != codecRaw || string(small[1:]) != "short" {
		t.Fatalf("short value = %q", small)
	}
	for _, bad := range [][]byte{{codecZstd, 1, 2, 3}, {7, 'x'}} {
		if _, err := decodeValue(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decode %v = %v; want ErrCorrupt", bad, err)
		}
	}
}

func TestCorruptStoredStateIsReported(t *testing.T) {
	s := NewMemory(0)
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Commit(ctx, "c", 0, []byte("ok"), 0); err != nil {
		t.Fatal(err)
	}
	// Damage the stored bytes underneath the store.
	_ = s.db.update(func(tx kvTx) error {
		return tx.bucket(bktSessions).bucket([]byte("c")).put(keyState, []byte{codecZstd, 0xde, 0xad})
	})
	if _, err := s.Load(ctx, "c"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load of a damaged state = %v; want ErrCorrupt", err)
	}
}

func FuzzCodec(f *testing.F) {
	f.Add([]byte("hello"))
	f.Add([]byte(strings.Repeat("abc", 100)))
	f.Add([]byte{codecZstd, 0x28, 0xb5, 0x2f, 0xfd})
	f.Fuzz(func(t *testing.T, v []byte) {
		got, err := decodeValue(encodeValue(v))
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("round trip of %d bytes: %v", len(v), err)
		}
		_, _ = decodeValue(v) // arbitrary stored bytes never panic
	})
}

func FuzzSessionID(f *testing.F) {
	for _, s := range []string{"a", "{a}", "a:b}", "\x00", "é", "~x", strings.Repeat("z", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := ValidateSessionID(id)
		if err != nil {
			if !errors.Is(err, ErrInvalidSession) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !utf8.ValidString(id) || len(id) == 0 || len(id) > MaxSessionIDLen {
			t.Fatalf("accepted %q", id)
		}
		enc := EncodeSessionID(id)
		if strings.ContainsAny(enc, "{}:") || enc == "" {
			t.Fatalf("encoded %q to %q, unsafe inside a hash tag", id, enc)
		}
		if enc[0] != '~' && enc != id {
			t.Fatalf("verbatim encoding changed the id: %q -> %q", id, enc)
		}
		if enc[0] == '~' && id == enc {
			t.Fatalf("hashed form equals its input %q", id)
		}
	})
}

package store

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// Stored values (states and blobs) carry a one-byte codec header so the choice can change
// without migrating data: codecRaw stores the bytes as given, codecZstd a zstd frame.
// Values shorter than minCompress, or that do not shrink, are stored raw.
const (
	codecRaw  byte = 0
	codecZstd byte = 1

	minCompress = 128
)

var (
	zstdEnc *zstd.Encoder
	zstdDec *zstd.Decoder
)

func init() {
	var err error
	// SpeedDefault (zstd level 3): measured in BenchmarkCompression against s2; see docs/store.md.
	// EncodeAll borrows one of GOMAXPROCS encoders, so concurrent commits compress in parallel.
	zstdEnc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		panic(err)
	}
	zstdDec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<30))
	if err != nil {
		panic(err)
	}
}

// encodeValue returns the stored form of v.
func encodeValue(v []byte) []byte {
	if len(v) >= minCompress {
		out := make([]byte, 1, len(v)/3+64)
		out[0] = codecZstd
		out = zstdEnc.EncodeAll(v, out)
		if len(out) < len(v)+1 {
			return out
		}
	}
	out := make([]byte, len(v)+1)
	out[0] = codecRaw
	copy(out[1:], v)
	return out
}

// decodeValue reverses encodeValue. A nil or empty stored value decodes to nil.
func decodeValue(stored []byte) ([]byte, error) {
	if len(stored) == 0 {
		return nil, nil
	}
	switch stored[0] {
	case codecRaw:
		out := make([]byte, len(stored)-1)
		copy(out, stored[1:])
		return out, nil
	case codecZstd:
		out, err := zstdDec.DecodeAll(stored[1:], nil)
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("%w: unknown codec byte %d", ErrCorrupt, stored[0])
	}
}

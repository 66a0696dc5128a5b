package cost

import (
	"bytes"
	"encoding/base64"
	"image"
	_ "image/gif"  // image.DecodeConfig for GIF
	_ "image/jpeg" // image.DecodeConfig for JPEG
	_ "image/png"  // image.DecodeConfig for PNG
	"math"
	"math/bits"
	"unicode/utf8"
)

// Estimator turns prompt content into token estimates. Implementations must be deterministic
// and safe for concurrent use. Swap in a real tokenizer by implementing it.
type Estimator interface {
	// Text returns the tokens of a piece of text (message text, thinking, tool input JSON,
	// tool result text, tool definition JSON).
	Text(s string) int
	// Image returns the tokens of an image given its media type and base64 data (data may be
	// empty for URL images).
	Image(mediaType, base64Data string) int
	// Document returns the tokens of a non-text document (e.g. base64 PDF).
	Document(mediaType string, base64Data string) int
	// Overhead returns the fixed tokens a structural element costs: a message ("message") or
	// a block ("block").
	Overhead(kind string) int
}

// CharEstimator estimates tokens = ceil(asciiBytes/CharsPerToken + nonASCIIRunes*NonASCIITokens);
// images by Anthropic's formula from their header, ImageFallback when undecodable. The rates
// are explained in docs/cost-model.md.
type CharEstimator struct {
	// CharsPerToken is the ASCII characters per token (default 4).
	CharsPerToken float64
	// NonASCIITokens is the tokens per non-ASCII rune (default 1).
	NonASCIITokens float64
	// ImageFallback is the token count of an image whose size cannot be read (default 1600,
	// about a 1.2-megapixel image).
	ImageFallback int
	// MessageOverhead is the tokens of role and framing per message (default 4).
	MessageOverhead int
	// BlockOverhead is the tokens of framing per content block (default 2).
	BlockOverhead int
}

// DefaultEstimator is the character-based estimator with its default rates.
var DefaultEstimator Estimator = CharEstimator{}

func (e CharEstimator) cpt() float64 {
	if e.CharsPerToken <= 0 {
		return 4
	}
	return e.CharsPerToken
}

// Text implements Estimator.
func (e CharEstimator) Text(s string) int {
	if s == "" {
		return 0
	}
	ascii, other := countRunes(s)
	na := e.NonASCIITokens
	if na <= 0 {
		na = 1
	}
	return int(math.Ceil(float64(ascii)/e.cpt() + float64(other)*na))
}

// countRunes counts the ASCII bytes of s and the lead bytes of its multi-byte sequences (one
// per non-ASCII rune) without decoding, eight bytes at a time.
func countRunes(s string) (ascii, other int) {
	const hi = 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		h := w & hi
		if h == 0 {
			ascii += 8
			continue
		}
		ascii += 8 - bits.OnesCount64(h)
		// A lead byte has its top two bits set: 11xxxxxx.
		other += bits.OnesCount64(h & (w << 1))
	}
	for ; i < len(s); i++ {
		c := s[i]
		if c < utf8.RuneSelf {
			ascii++
		} else if c&0xC0 != 0x80 {
			other++
		}
	}
	return ascii, other
}

// Image implements Estimator.
func (e CharEstimator) Image(_ string, data string) int {
	fallback := e.ImageFallback
	if fallback <= 0 {
		fallback = 1600
	}
	if data == "" {
		return fallback
	}
	// The header is within the first few KB for PNG and GIF; JPEG may need more, so
	// decode a generous prefix.
	head := data
	if len(head) > 64<<10 {
		head = head[:64<<10]
	}
	head = head[:len(head)/4*4]
	raw, err := base64.StdEncoding.DecodeString(head)
	if err != nil {
		return fallback
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(raw))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return fallback
	}
	return ImageTokens(cfg.Width, cfg.Height)
}

// ImageTokens is Anthropic's image token formula: the image is scaled so that its long edge is
// at most 1568 px, then costs width×height/750 tokens (rounded up).
func ImageTokens(w, h int) int {
	fw, fh := float64(w), float64(h)
	if long := math.Max(fw, fh); long > 1568 {
		s := 1568 / long
		fw, fh = math.Floor(fw*s), math.Floor(fh*s)
	}
	return int(math.Ceil(fw * fh / 750))
}

// Document implements Estimator: a base64 document counts one token per 4 decoded bytes
// (text-heavy PDFs run close to that once extracted).
func (e CharEstimator) Document(_ string, data string) int {
	return int(math.Ceil(float64(len(data)) * 3 / 4 / 4))
}

// Overhead implements Estimator.
func (e CharEstimator) Overhead(kind string) int {
	switch kind {
	case "message":
		if e.MessageOverhead > 0 {
			return e.MessageOverhead
		}
		return 4
	case "block":
		if e.BlockOverhead > 0 {
			return e.BlockOverhead
		}
		return 2
	}
	return 0
}

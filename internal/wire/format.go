package wire

import "fmt"

// Format is a provider wire format. Its text form (String, MarshalText, ParseFormat) is its
// name; the zero Format is no format, written as "".
type Format uint8

const (
	// Anthropic is the Anthropic Messages API request format.
	Anthropic Format = iota + 1
	// OpenAI is the OpenAI Chat Completions request format.
	OpenAI
	// Responses is the OpenAI Responses API request format (POST /v1/responses): its
	// "input" items map onto Messages (docs/formats.md "Responses API").
	Responses
)

var formatNames = [...]string{Anthropic: "anthropic", OpenAI: "openai", Responses: "responses"}

// String returns "anthropic", "openai" or "responses".
func (f Format) String() string {
	if f != 0 && int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// ParseFormat returns the format named s: "anthropic", "openai" or "responses".
func ParseFormat(s string) (Format, error) {
	for f := Anthropic; int(f) < len(formatNames); f++ {
		if formatNames[f] == s {
			return f, nil
		}
	}
	return 0, fmt.Errorf("unknown wire format %q (want anthropic, openai or responses)", s)
}

// MarshalText returns the format's name, and "" for the zero Format.
func (f Format) MarshalText() ([]byte, error) {
	if int(f) >= len(formatNames) {
		return nil, fmt.Errorf("wire: %v has no name", f)
	}
	return []byte(formatNames[f]), nil
}

// UnmarshalText reads a name ParseFormat accepts; "" reads as the zero Format.
func (f *Format) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*f = 0
		return nil
	}
	g, err := ParseFormat(string(text))
	if err == nil {
		*f = g
	}
	return err
}

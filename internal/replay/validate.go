package replay

import (
	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/wire"
)

// Validate checks a rewritten request the way a provider would: it must parse as the wire
// format (errors match wire.ErrInvalid) and pass wire.Validate (a *wire.ValidationError naming
// the broken rule: orphan or duplicate results, dangling calls, role alternation, empty
// content, too many cache_control markers, ...).
func Validate(f cost.WireFormat, body []byte) error {
	_, err := parseValid(f, body)
	return err
}

// parseValid is Validate returning the parsed request too (nil when the body does not parse;
// set when it parses but breaks a rule).
func parseValid(f cost.WireFormat, body []byte) (*wire.Request, error) {
	r, err := wire.Parse(WireFormat(f), body)
	if err != nil {
		return nil, err
	}
	return r, wire.Validate(r)
}

// WireFormat is the wire format of request bodies of the cost model's format f.
func WireFormat(f cost.WireFormat) wire.Format {
	switch f {
	case cost.OpenAI:
		return wire.OpenAI
	case cost.Responses:
		return wire.Responses
	}
	return wire.Anthropic
}

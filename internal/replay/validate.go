package replay

import (
	"github.com/condense-dev/condense/internal/wire"
)

// Validate checks a rewritten request as a provider would: it must parse as format f (errors
// match wire.ErrInvalid) and pass wire.Validate (a *wire.ValidationError naming the rule).
func Validate(f wire.Format, body []byte) error {
	_, err := parseValid(f, body)
	return err
}

// parseValid is Validate returning the parsed request too (nil when the body does not parse;
// set when it parses but breaks a rule).
func parseValid(f wire.Format, body []byte) (*wire.Request, error) {
	r, err := wire.Parse(f, body)
	if err != nil {
		return nil, err
	}
	return r, wire.Validate(r)
}

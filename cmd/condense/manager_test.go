package main

import (
	"testing"

	"github.com/condense-dev/condense/internal/specs"
)

// TestChildImage: --image wins, then CONDENSE_IMAGE (the manager's own image, set by the chart
// and config/manager), then the built-in default.
func TestChildImage(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == envImage {
				return v
			}
			return ""
		}
	}
	for _, c := range []struct{ flag, env, want string }{
		{"flag:1", "env:2", "flag:1"},
		{"", "env:2", "env:2"},
		{"", " ", specs.DefaultImage},
		{"", "", specs.DefaultImage},
	} {
		if got := childImage(c.flag, env(c.env)); got != c.want {
			t.Errorf("flag %q env %q: %q, want %q", c.flag, c.env, got, c.want)
		}
	}
}

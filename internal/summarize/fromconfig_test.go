package summarize

import (
	"testing"

	"github.com/condense-dev/condense/internal/config"
)

// TestFromConfigModelNames pins which summarizer each summarizer.model value selects,
// independent of which one is the configuration default.
func TestFromConfigModelNames(t *testing.T) {
	for model, want := range map[string]string{"": "extractive", "extractive": "extractive", "default": "session"} {
		c := config.Default()
		c.Summarizer.Model = model
		s, err := FromConfig(c, Options{})
		if err != nil {
			t.Fatalf("model %q: %v", model, err)
		}
		got := "other"
		switch s.(type) {
		case Extractive:
			got = "extractive"
		case *SessionModel:
			got = "session"
		}
		if got != want {
			t.Errorf("model %q selects %s (%T), want %s", model, got, s, want)
		}
	}
}

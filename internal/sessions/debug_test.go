package sessions

import (
	"path/filepath"
	"testing"

	"github.com/condense-dev/condense/internal/testutil/corpus"
)

func TestDebugAll(t *testing.T) {
	for _, f := range corpus.Files(t) {
		s, err := ImportFile(f, FormatAuto)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		bad := 0
		for _, p := range s.Providers() {
			for k := 0; k < s.Len(); k++ {
				body, err := s.Request(k, p)
				if err != nil {
					t.Fatal(err)
				}
				chk := checkAnthropic
				if p == OpenAI {
					chk = checkOpenAI
				}
				if err := chk(body); err != nil {
					if bad < 3 {
						t.Errorf("%s %s req %d (line %d): %v", filepath.Base(f), p, k, s.Point(k).Line, err)
					}
					bad++
				}
			}
		}
		t.Logf("%s: %s len=%d ctx=%d stats=%+v bad=%d", filepath.Base(f), s.Format, s.Len(), s.Contexts(Anthropic), s.Stats, bad)
	}
}

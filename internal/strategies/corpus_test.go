package strategies

import (
	"context"
	"testing"

	"github.com/condense-dev/condense/internal/replay"
	"github.com/condense-dev/condense/internal/testutil/corpus"
)

// TestCorpusSmallSessionsValid replays the small corpus sessions (one per format family)
// through every strategy: no rewritten request may be invalid, no strategy may fail, and
// condense must not cost more than sending the requests unchanged.
func TestCorpusSmallSessionsValid(t *testing.T) {
	names := []string{
		"ccspot_short.jsonl",
		"cccodemie_session-9eda1058.jsonl",
		"ccspot_agent-a881341.jsonl",
		"sweagent_pydicom__pydicom-1458.traj",
		"sweagent_marshmallow-code__marshmallow-1867.traj",
	}
	cond, err := NewCondense(CondenseOptions{CacheAware: true, MidRun: true})
	if err != nil {
		t.Fatal(err)
	}
	strats := []replay.Strategy{None{}, cond, Reference(), DefaultClearToolUses(), ObservationMask{Window: 10}}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			tr, err := replay.Open(corpus.File(t, name), "")
			if err != nil {
				t.Fatal(err)
			}
			rep, err := replay.Run(context.Background(), tr, replay.Options{Strategies: strats})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range rep.Strategies {
				if s.Invalid != 0 || s.Errors != 0 || s.Requests != tr.Len() {
					t.Errorf("%s: invalid %d errors %d requests %d/%d %+v", s.Name, s.Invalid, s.Errors, s.Requests, tr.Len(), s.Diagnostics)
				}
			}
			if c, n := rep.Strategies[1].Cost, rep.Strategies[0].Cost; c > n*1.0001 {
				t.Errorf("condense %.4f costs more than none %.4f", c, n)
			}
		})
	}
}

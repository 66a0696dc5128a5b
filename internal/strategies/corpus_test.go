package strategies

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/replay"
	"github.com/condense-dev/condense/internal/testutil/codexrollout"
	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/wire"
)

// replayValid replays tr through strats and fails on an invalid request, a strategy error or a
// request left unbilled.
func replayValid(t *testing.T, tr replay.Transcript, strats []replay.Strategy) replay.SessionReport {
	t.Helper()
	rep, err := replay.Run(context.Background(), tr, replay.Options{Strategies: strats})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Strategies {
		if s.Invalid != 0 || s.Errors != 0 || s.Requests != tr.Len() {
			t.Errorf("%s: invalid %d errors %d requests %d/%d %+v", s.Name, s.Invalid, s.Errors, s.Requests, tr.Len(), s.Diagnostics)
		}
	}
	return rep
}

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
			tr, err := replay.OpenWith(corpus.File(t, name), replay.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rep := replayValid(t, tr, strats)
			if c, n := rep.Strategies[1].Cost, rep.Strategies[0].Cost; c > n*1.0001 {
				t.Errorf("condense %.4f costs more than none %.4f", c, n)
			}
		})
	}
}

// TestCorpusCodexResponses replays the corpus Codex sessions in their native Responses form
// through every strategy: no rewritten request is invalid, every strategy that prunes
// changes what is billed, and condense costs less than sending the requests unchanged.
func TestCorpusCodexResponses(t *testing.T) {
	cond, err := NewCondense(CondenseOptions{CacheAware: true, MidRun: true})
	if err != nil {
		t.Fatal(err)
	}
	strats := []replay.Strategy{None{}, cond, Reference(), ClearToolUses{Trigger: 20000, Keep: 3}, ObservationMask{Window: 10}}
	for _, path := range codexrollout.Files(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			tr, err := replay.OpenWith(path, replay.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tr.WireFormat() != wire.Responses {
				t.Fatalf("replayed as %v", tr.WireFormat())
			}
			rep := replayValid(t, tr, strats)
			for i, s := range rep.Strategies {
				if i > 0 && i != 2 && s.Usage == rep.Strategies[0].Usage {
					t.Errorf("%s billed exactly what none did", s.Name)
				}
			}
			if c, n := rep.Strategies[1].Cost, rep.Strategies[0].Cost; c >= n {
				t.Errorf("condense %.4f does not cost less than none %.4f", c, n)
			}
		})
	}
}

// TestCorpusTextObservations replays the corpus's text-protocol sessions (mini-swe-agent
// 1.x, text-mode SWE-agent): no strategy sends an invalid request; condense, with the
// session's observations on, and observation-mask both change what is sent (they prune
// observations); condense costs less than none. The fidelity measure finds uses of the
// observations: condense loses none of them, observation-mask loses some in the long
// mini-swe-agent sessions.
func TestCorpusTextObservations(t *testing.T) {
	cond, err := NewCondense(CondenseOptions{CacheAware: true, MidRun: true})
	if err != nil {
		t.Fatal(err)
	}
	strats := []replay.Strategy{None{}, cond, Reference(), DefaultClearToolUses(), ObservationMask{Window: 10}}
	for _, path := range corpus.Files(t) {
		name := filepath.Base(path)
		if !strings.HasPrefix(name, "msa_") && name != "sweagent_pydicom__pydicom-1458.traj" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			tr, err := replay.OpenWith(path, replay.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if replay.ObservationHarness(tr) == "" {
				t.Fatal("not a text-protocol session")
			}
			rep := replayValid(t, tr, strats)
			none, c, mask := rep.Strategies[0], rep.Strategies[1], rep.Strategies[4]
			if c.Cost >= none.Cost || c.Usage == none.Usage {
				t.Errorf("condense %.4f does not save on none %.4f", c.Cost, none.Cost)
			}
			if mask.Usage == none.Usage && tr.Len() > 11 {
				t.Errorf("observation-mask masked nothing")
			}
			if none.Fidelity.Uses == 0 || c.Fidelity.Uses != none.Fidelity.Uses || c.Fidelity.Lost != 0 {
				t.Errorf("fidelity: none %+v, condense %+v", none.Fidelity, c.Fidelity)
			}
			if strings.HasPrefix(name, "msa_") && mask.Fidelity.Lost == 0 {
				t.Errorf("observation-mask lost nothing: %+v", mask.Fidelity)
			}
		})
	}
}

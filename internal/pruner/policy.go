package pruner

import (
	"regexp"
	"strings"
	"sync"
)

// BatchingMode selects how captured tool results are grouped into summaries.
type BatchingMode string

const (
	// BatchTurn makes one batch (one summary) per tool-using assistant turn.
	BatchTurn BatchingMode = "turn"
	// BatchAgentMessage merges consecutive pending turns of one user turn into one batch.
	BatchAgentMessage BatchingMode = "agent-message"
)

// ChainPolicy configures chain compression (reference §11).
type ChainPolicy struct {
	// Enabled turns chain compression on (planning and render).
	Enabled bool `json:"enabled"`
	// RollingWindow is how many of the newest closed chains stay uncompressed (K).
	RollingWindow int `json:"rollingWindow"`
	// StripFinalAssistantThinking drops thinking blocks from a compressed chain's final assistant.
	StripFinalAssistantThinking bool `json:"stripFinalAssistantThinking"`
	// FuseRangeSummary plans one range-fusion call per chain with two or more batch summaries.
	FuseRangeSummary bool `json:"fuseRangeSummary"`
}

// PurgePolicy configures the error purge (reference §10.4).
type PurgePolicy struct {
	// Enabled turns the purge on.
	Enabled bool `json:"enabled"`
	// CooldownTurns is how many assistant turns an errored call keeps its arguments.
	CooldownTurns int `json:"cooldownTurns"`
	// MinArgChars is the smallest argument JSON length (UTF-16 units) that is purged.
	MinArgChars int `json:"minArgChars"`
}

// Policy is the pruning behaviour. The zero value is not useful; start from DefaultPolicy.
type Policy struct {
	// BatchingMode is BatchTurn or BatchAgentMessage; any other value behaves as BatchTurn.
	BatchingMode BatchingMode `json:"batchingMode"`
	// MinBatchChars skips batches whose post-dedup results total fewer UTF-16 units (0 disables).
	MinBatchChars int `json:"minBatchChars"`
	// Dedup aliases a result whose content hash matches an earlier indexed record.
	Dedup bool `json:"dedup"`
	// SpillThreshold is the result size (UTF-16 units) at which a single result is spilled
	// instead of summarized; <= 0 disables spilling.
	SpillThreshold int `json:"spillThreshold"`
	// SpillPreviewChars is the UTF-8 byte budget of a spilled result's head preview.
	SpillPreviewChars int `json:"spillPreviewChars"`
	// ProtectedTools lists tool names whose results are never pruned.
	ProtectedTools []string `json:"protectedTools"`
	// ProtectedPaths lists globs matched against a call's "path" argument (reference §7.1).
	ProtectedPaths []string `json:"protectedPaths"`
	// RecoveryGraceTurns keeps context_tree_query results verbatim for this many user turns.
	RecoveryGraceTurns int `json:"recoveryGraceTurns"`
	// Chain configures chain compression.
	Chain ChainPolicy `json:"chain"`
	// PurgeErrors configures the error purge.
	PurgeErrors PurgePolicy `json:"purgeErrors"`
	// Observations prunes the text observations of text-protocol agents (off by default).
	Observations ObservationPolicy `json:"observations"`
}

// DefaultPolicy returns the reference defaults (reference §16).
func DefaultPolicy() Policy {
	return Policy{
		BatchingMode:       BatchTurn,
		MinBatchChars:      1000,
		Dedup:              true,
		SpillThreshold:     65536,
		SpillPreviewChars:  2048,
		ProtectedTools:     nil,
		ProtectedPaths:     []string{"**/skills/**/*.md"},
		RecoveryGraceTurns: 3,
		Chain:              ChainPolicy{Enabled: true, RollingWindow: 3, StripFinalAssistantThinking: true, FuseRangeSummary: true},
		PurgeErrors:        PurgePolicy{Enabled: true, CooldownTurns: 2, MinArgChars: 500},
	}
}

// IsProtected reports whether a call of tool with the given "path" argument (hasPath false when
// the argument is absent or not a string) is protected by the policy (reference §7.1).
func (p *Policy) IsProtected(tool, path string, hasPath bool) bool {
	for _, t := range p.ProtectedTools {
		if t == tool {
			return true
		}
	}
	if !hasPath || len(p.ProtectedPaths) == 0 {
		return false
	}
	path = strings.ReplaceAll(path, `\`, "/")
	for _, g := range p.ProtectedPaths {
		if compileGlob(g).match(path) {
			return true
		}
	}
	return false
}

var globCache sync.Map // pattern -> *glob

// glob is a compiled protected-path glob: its regular expression, and the literal pieces
// every matching path must contain (checked first: most paths contain none of them).
type glob struct {
	re   *regexp.Regexp
	lits []string
}

// match reports whether path matches the glob.
func (g *glob) match(path string) bool {
	for _, l := range g.lits {
		if !strings.Contains(path, l) {
			return false
		}
	}
	return g.re.MatchString(path)
}

// compileGlob compiles a protected-path glob: "**/" matches zero or more whole directories,
// "**" anything, "*" and "?" stay within one segment, everything else is literal; the match is
// anchored and case-sensitive.
func compileGlob(pattern string) *glob {
	if g, ok := globCache.Load(pattern); ok {
		return g.(*glob)
	}
	g := &glob{}
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pattern); {
		switch {
		case strings.HasPrefix(pattern[i:], "**/"):
			b.WriteString("(?:[^/]*/)*")
			i += 3
		case strings.HasPrefix(pattern[i:], "**"):
			b.WriteString(".*")
			i += 2
		case pattern[i] == '*':
			b.WriteString("[^/]*")
			i++
		case pattern[i] == '?':
			b.WriteString("[^/]")
			i++
		default:
			j := i + 1
			for j < len(pattern) && pattern[j] != '*' && pattern[j] != '?' {
				j++
			}
			b.WriteString(regexp.QuoteMeta(pattern[i:j]))
			g.lits = append(g.lits, pattern[i:j])
			i = j
		}
	}
	b.WriteString("$")
	g.re = regexp.MustCompile(b.String())
	globCache.Store(pattern, g)
	return g
}

package strategies

import (
	"encoding/json"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/condense-dev/condense/internal/pruner"
)

// PolicyFileError reports a policy file that cannot be used.
type PolicyFileError struct {
	// Path is the file.
	Path string
	// Msg says what is wrong.
	Msg string
}

// Error implements error.
func (e *PolicyFileError) Error() string { return "policy file " + e.Path + ": " + e.Msg }

// policySpec mirrors the engine fields of a PruningPolicy spec (condense.dev/v1alpha1) and of
// a ProxyConfig's engine block. A private adapter: only what the engine policy needs is read.
type policySpec struct {
	BatchingMode  *string `json:"batchingMode"`
	MinBatchChars *int    `json:"minBatchChars"`
	Dedup         *bool   `json:"dedup"`
	Spill         struct {
		Threshold    *int `json:"threshold"`
		PreviewBytes *int `json:"previewBytes"`
	} `json:"spill"`
	ProtectedTools     []string `json:"protectedTools"`
	ProtectedPaths     []string `json:"protectedPaths"`
	RecoveryGraceTurns *int     `json:"recoveryGraceTurns"`
	ChainCompression   struct {
		Enabled                     *bool `json:"enabled"`
		RollingWindow               *int  `json:"rollingWindow"`
		StripFinalAssistantThinking *bool `json:"stripFinalAssistantThinking"`
		FuseRangeSummary            *bool `json:"fuseRangeSummary"`
	} `json:"chainCompression"`
	PurgeErrors struct {
		Enabled       *bool `json:"enabled"`
		CooldownTurns *int  `json:"cooldownTurns"`
		MinArgChars   *int  `json:"minArgChars"`
	} `json:"purgeErrors"`
	Observations struct {
		Enabled  *bool                       `json:"enabled"`
		Harness  *string                     `json:"harness"`
		Patterns []pruner.ObservationPattern `json:"patterns"`
	} `json:"observations"`
}

// LoadPolicy reads the engine policy from a PruningPolicy manifest (its spec), a ProxyConfig
// (its engine block) or a bare spec, in YAML or JSON. Fields left out keep
// pruner.DefaultPolicy's values; fields that are not engine settings are ignored.
func LoadPolicy(path string) (pruner.Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return pruner.Policy{}, err
	}
	return ParsePolicy(path, data)
}

// ParsePolicy is LoadPolicy on bytes; name is used in errors.
func ParsePolicy(name string, data []byte) (pruner.Policy, error) {
	pol := pruner.DefaultPolicy()
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return pol, &PolicyFileError{Path: name, Msg: err.Error()}
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(js, &doc); err != nil {
		return pol, &PolicyFileError{Path: name, Msg: "not a YAML/JSON object"}
	}
	var kind string
	if raw, ok := doc["kind"]; ok {
		_ = json.Unmarshal(raw, &kind)
	}
	body := js
	switch kind {
	case "PruningPolicy":
		raw, ok := doc["spec"]
		if !ok {
			return pol, &PolicyFileError{Path: name, Msg: "PruningPolicy without spec"}
		}
		body = raw
	case "ProxyConfig":
		raw, ok := doc["engine"]
		if !ok {
			return pol, nil
		}
		body = raw
	case "":
	default:
		return pol, &PolicyFileError{Path: name, Msg: fmt.Sprintf("kind %q: want PruningPolicy, ProxyConfig or a bare spec", kind)}
	}
	var s policySpec
	if err := json.Unmarshal(body, &s); err != nil {
		return pol, &PolicyFileError{Path: name, Msg: err.Error()}
	}
	setInt := func(dst *int, v *int, field string, min int) error {
		if v == nil {
			return nil
		}
		if *v < min {
			return &PolicyFileError{Path: name, Msg: fmt.Sprintf("%s = %d, want >= %d", field, *v, min)}
		}
		*dst = *v
		return nil
	}
	setBool := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	if s.BatchingMode != nil {
		switch pruner.BatchingMode(*s.BatchingMode) {
		case pruner.BatchTurn, pruner.BatchAgentMessage:
			pol.BatchingMode = pruner.BatchingMode(*s.BatchingMode)
		default:
			return pol, &PolicyFileError{Path: name, Msg: fmt.Sprintf("batchingMode %q: want turn or agent-message", *s.BatchingMode)}
		}
	}
	for _, e := range []error{
		setInt(&pol.MinBatchChars, s.MinBatchChars, "minBatchChars", 0),
		setInt(&pol.SpillThreshold, s.Spill.Threshold, "spill.threshold", 0),
		setInt(&pol.SpillPreviewChars, s.Spill.PreviewBytes, "spill.previewBytes", 0),
		setInt(&pol.RecoveryGraceTurns, s.RecoveryGraceTurns, "recoveryGraceTurns", 0),
		setInt(&pol.Chain.RollingWindow, s.ChainCompression.RollingWindow, "chainCompression.rollingWindow", 0),
		setInt(&pol.PurgeErrors.CooldownTurns, s.PurgeErrors.CooldownTurns, "purgeErrors.cooldownTurns", 0),
		setInt(&pol.PurgeErrors.MinArgChars, s.PurgeErrors.MinArgChars, "purgeErrors.minArgChars", 0),
	} {
		if e != nil {
			return pol, e
		}
	}
	setBool(&pol.Dedup, s.Dedup)
	setBool(&pol.Chain.Enabled, s.ChainCompression.Enabled)
	setBool(&pol.Chain.StripFinalAssistantThinking, s.ChainCompression.StripFinalAssistantThinking)
	setBool(&pol.Chain.FuseRangeSummary, s.ChainCompression.FuseRangeSummary)
	setBool(&pol.PurgeErrors.Enabled, s.PurgeErrors.Enabled)
	if s.ProtectedTools != nil {
		pol.ProtectedTools = s.ProtectedTools
	}
	if s.ProtectedPaths != nil {
		pol.ProtectedPaths = s.ProtectedPaths
	}
	o := &pol.Observations
	setBool(&o.Enabled, s.Observations.Enabled)
	if s.Observations.Harness != nil {
		o.Harness = *s.Observations.Harness
	}
	if s.Observations.Patterns != nil {
		o.Patterns = s.Observations.Patterns
	}
	if err := pruner.ValidateObservations(*o); err != nil {
		return pol, &PolicyFileError{Path: name, Msg: "observations: " + err.Error()}
	}
	return pol, nil
}

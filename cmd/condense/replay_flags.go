package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/strategies"
	"github.com/condense-dev/condense/internal/summarize"
)

// condenseFlags holds the condense strategy's flags until the command runs.
type condenseFlags struct {
	opts       strategies.CondenseOptions
	policyFile string
	configFile string
	plain      bool
	noMidRun   bool
}

// Flag names of the trigger knobs that a policy or config file also sets.
const (
	flagNoCacheAware = "no-cache-aware"
	flagNoMidRun     = "no-mid-run"
	flagGraceTurns   = "grace-turns"
	flagHorizon      = "horizon"
	flagMaxHorizon   = "max-horizon"
)

// addCondenseFlags registers the condense strategy's flags.
func addCondenseFlags(fl *pflag.FlagSet, c *condenseFlags) {
	fl.StringVar(&c.policyFile, "policy", "", "condense: engine policy and flush trigger from a PruningPolicy manifest, ProxyConfig or bare spec (YAML/JSON) `FILE`; replaces the --config file's engine block")
	fl.StringVar(&c.configFile, "config", "", "condense: a ProxyConfig `FILE`: its summarizer block configures the summarizer (default: extractive) and, without --policy, its engine block is the policy and flush trigger")
	fl.BoolVar(&c.plain, flagNoCacheAware, false, "condense: flush at every trigger, without weighing it against the prompt cache (file: trigger.cacheAware: false)")
	fl.IntVar(&c.opts.Horizon, flagHorizon, strategies.DefaultHorizon, "condense: minimum further requests the cache-aware flush decision assumes (file: trigger.horizon)")
	fl.IntVar(&c.opts.MaxHorizon, flagMaxHorizon, strategies.DefaultMaxHorizon, "condense: most further requests a flush may take to pay for its cache rewrite (file: trigger.maxHorizon)")
	fl.IntVar(&c.opts.GraceTurns, flagGraceTurns, strategies.DefaultGraceTurns, "condense: latest tool-using turns a mid-run flush never touches (file: trigger.midRunGraceTurns)")
	fl.BoolVar(&c.noMidRun, flagNoMidRun, false, "condense: weigh flushes only at final replies (the agent-message trigger), not inside long agent runs (file: trigger.midRun: false)")
}

// condenseOptions finalises the condense options: built-in defaults, then the engine file
// (--policy, else --config: engine policy and trigger knobs), then every flag set explicitly.
// Trigger settings the replay cannot simulate are returned as warnings (docs/replay.md).
func condenseOptions(fl *pflag.FlagSet, c *condenseFlags, prices *cost.Prices) (strategies.CondenseOptions, []string, error) {
	o := c.opts
	cacheAware, midRun := !c.plain, !c.noMidRun
	var warnings []string
	if c.configFile != "" {
		cfg, err := config.Load(c.configFile)
		if err != nil {
			return o, nil, err
		}
		if o.Summarizer, err = summarize.FromConfig(cfg, summarize.Options{Prices: prices}); err != nil {
			return o, nil, err
		}
	}
	engineFile := c.policyFile
	if engineFile == "" {
		engineFile = c.configFile
	}
	if engineFile != "" {
		pol, err := strategies.LoadPolicy(engineFile)
		if err != nil {
			return o, nil, err
		}
		o.Policy = &pol
		t, err := loadTrigger(engineFile)
		if err != nil {
			return o, nil, err
		}
		if !fl.Changed(flagNoCacheAware) {
			cacheAware = t.CacheAware
		}
		if !fl.Changed(flagNoMidRun) {
			midRun = t.MidRun
		}
		if !fl.Changed(flagGraceTurns) {
			o.GraceTurns = t.MidRunGraceTurns
		}
		if !fl.Changed(flagHorizon) {
			o.Horizon = t.Horizon
		}
		if !fl.Changed(flagMaxHorizon) {
			o.MaxHorizon = t.MaxHorizon
		}
		warnings = unsimulatedTrigger(engineFile, t)
	}
	o.CacheAware = cacheAware
	o.MidRun = cacheAware && midRun
	return o, warnings, nil
}

// unsimulatedTrigger lists the trigger settings of t that the replay does not model: it
// flushes at final replies (the agent-message trigger) and, cache-aware, inside long runs.
func unsimulatedTrigger(path string, t config.Trigger) []string {
	var out []string
	note := func(setting string) {
		out = append(out, fmt.Sprintf("%s: %s is not simulated by replay (it flushes at the agent's final replies and, cache-aware, mid-run)", path, setting))
	}
	if t.Mode == config.TriggerOnDemand {
		note("trigger.mode " + string(config.TriggerOnDemand))
	}
	if t.AutoBudgetThreshold != nil {
		note(fmt.Sprintf("trigger.autoBudgetThreshold %g", *t.AutoBudgetThreshold))
	}
	if t.BudgetTurnDelta != nil {
		note(fmt.Sprintf("trigger.budgetTurnDelta %g", *t.BudgetTurnDelta))
	}
	return out
}

// triggerFileError reports a policy or config file whose flush trigger cannot be used.
type triggerFileError struct {
	// Path is the file.
	Path string
	// Err says what is wrong.
	Err error
}

// Error implements error.
func (e *triggerFileError) Error() string { return "trigger of " + e.Path + ": " + e.Err.Error() }

// Unwrap returns the underlying error (a *config.ValidationError for invalid values).
func (e *triggerFileError) Unwrap() error { return e.Err }

// loadTrigger reads the flush trigger from the file strategies.LoadPolicy reads: a
// PruningPolicy's spec.trigger, a ProxyConfig's engine.trigger or a bare spec's trigger. Omitted
// fields keep config.Default's values; unknown fields and invalid values are errors.
func loadTrigger(path string) (config.Trigger, error) {
	def := config.Default()
	data, err := os.ReadFile(path)
	if err != nil {
		return def.Engine.Trigger, err
	}
	fail := func(err error) (config.Trigger, error) {
		return def.Engine.Trigger, &triggerFileError{Path: path, Err: err}
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fail(err)
	}
	var doc struct {
		Kind    string                     `json:"kind"`
		Spec    map[string]json.RawMessage `json:"spec"`
		Engine  map[string]json.RawMessage `json:"engine"`
		Trigger json.RawMessage            `json:"trigger"`
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		return fail(errors.New("not a YAML/JSON object"))
	}
	raw := doc.Trigger
	switch doc.Kind {
	case "PruningPolicy":
		raw = doc.Spec["trigger"]
	case config.Kind:
		raw = doc.Engine["trigger"]
	}
	t := def.Engine.Trigger
	if len(bytes.TrimSpace(raw)) > 0 && string(raw) != "null" {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&t); err != nil {
			return fail(fmt.Errorf("trigger: %s", strings.TrimPrefix(err.Error(), "json: ")))
		}
	}
	def.Engine.Trigger = t
	if err := def.Validate(); err != nil {
		return fail(err)
	}
	return t, nil
}

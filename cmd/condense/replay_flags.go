package main

import (
	"github.com/spf13/pflag"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/strategies"
	"github.com/condense-dev/condense/internal/summarize"
)

// condenseFlagValues holds the condense strategy's flags until the command runs.
var condenseFlagValues struct {
	policyFile string
	plain      bool
	noMidRun   bool
	configFile string
}

// addCondenseFlags registers the condense strategy's flags.
func addCondenseFlags(fl *pflag.FlagSet, o *strategies.CondenseOptions) {
	fl.StringVar(&condenseFlagValues.policyFile, "policy", "", "condense: engine policy from a PruningPolicy manifest, ProxyConfig or bare spec (YAML/JSON) `FILE`")
	fl.StringVar(&condenseFlagValues.configFile, "config", "", "condense: a ProxyConfig `FILE` whose summarizer block configures an LLM summarizer (default: extractive) and, without --policy, whose engine block is the policy")
	fl.BoolVar(&condenseFlagValues.plain, "no-cache-aware", false, "condense: flush at every trigger, without weighing it against the prompt cache")
	fl.IntVar(&o.Horizon, "horizon", strategies.DefaultHorizon, "condense: minimum further requests the cache-aware flush decision assumes")
	fl.IntVar(&o.MaxHorizon, "max-horizon", strategies.DefaultMaxHorizon, "condense: most further requests a flush may take to pay for its cache rewrite")
	fl.IntVar(&o.GraceTurns, "grace-turns", strategies.DefaultGraceTurns, "condense: latest tool-using turns a mid-run flush never touches")
	fl.BoolVar(&condenseFlagValues.noMidRun, "no-mid-run", false, "condense: weigh flushes only at final replies (the agent-message trigger), not inside long agent runs")
	o.CacheAware = true
}

// condenseOptions finalises the condense options from the flags.
func condenseOptions(o strategies.CondenseOptions, prices *cost.Prices) (strategies.CondenseOptions, error) {
	o.CacheAware = !condenseFlagValues.plain
	o.MidRun = o.CacheAware && !condenseFlagValues.noMidRun
	if f := condenseFlagValues.configFile; f != "" {
		c, err := config.Load(f)
		if err != nil {
			return o, err
		}
		if o.Summarizer, err = summarize.FromConfig(c, summarize.Options{Prices: prices}); err != nil {
			return o, err
		}
		if condenseFlagValues.policyFile == "" {
			pol, err := strategies.LoadPolicy(f)
			if err != nil {
				return o, err
			}
			o.Policy = &pol
		}
	}
	if condenseFlagValues.policyFile != "" {
		pol, err := strategies.LoadPolicy(condenseFlagValues.policyFile)
		if err != nil {
			return o, err
		}
		o.Policy = &pol
	}
	return o, nil
}

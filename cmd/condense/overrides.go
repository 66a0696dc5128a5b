package main

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/condense-dev/condense/internal/config"
)

// overrides are string flags that override fields of the configuration file.
type overrides struct {
	fl   *pflag.FlagSet
	list []override
}

// override is one such flag.
type override struct {
	flag, field string
	value       *string
	set         func(c *config.Config, v string)
}

// add registers --flag, which sets the configuration field (its YAML path) through set.
func (o *overrides) add(flag, field, usage string, set func(c *config.Config, v string)) {
	o.list = append(o.list, override{flag: flag, field: field, value: o.fl.String(flag, "", usage), set: set})
}

// apply sets the fields of the flags given on the command line (an empty value too) and
// validates cfg; an invalid value a flag set is reported under the flag's name.
func (o *overrides) apply(cfg *config.Config) error {
	byFlag := map[string]string{}
	for _, ov := range o.list {
		if o.fl.Changed(ov.flag) {
			ov.set(cfg, *ov.value)
			byFlag[ov.field] = "--" + ov.flag
		}
	}
	err := cfg.Validate()
	var ve *config.ValidationError
	if errors.As(err, &ve) {
		ve.SetByFlags(byFlag)
	}
	return err
}

// addListenFlags registers --metrics-listen and --health-listen (serving what health says),
// which pruner and proxy share.
func (o *overrides) addListenFlags(health string) {
	o.add("metrics-listen", "listen.metrics", `address of /metrics (overrides listen.metrics; "" disables)`,
		func(c *config.Config, v string) { c.Listen.Metrics = v })
	o.add("health-listen", "listen.health", "address of "+health+` (overrides listen.health; "" disables)`,
		func(c *config.Config, v string) { c.Listen.Health = v })
}

package cost

import (
	_ "embed"
	"fmt"
	"os"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

//go:embed prices.yaml
var defaultPricesYAML []byte

// CacheMode says how a provider caches prompt prefixes.
type CacheMode string

const (
	// CacheAnthropic is Anthropic prompt caching: prefixes are written at the request's
	// cache_control breakpoints and looked up at (and shortly before) each breakpoint.
	CacheAnthropic CacheMode = "anthropic"
	// CacheAutomatic is implicit provider caching (OpenAI, Gemini): every request's prefix is
	// cached at every block boundary without breakpoints.
	CacheAutomatic CacheMode = "automatic"
	// CacheNone means the provider does not cache prompts: every input token is billed in full.
	CacheNone CacheMode = "none"
)

// Price is one model's pricing: base prices in USD per million tokens and the cache rules.
type Price struct {
	// Match is the model-id prefix this entry applies to.
	Match string `json:"match"`
	// Input is the base input price in USD per million tokens.
	Input float64 `json:"input"`
	// Output is the output price in USD per million tokens.
	Output float64 `json:"output"`
	// Cache is the caching scheme of the provider for this model.
	Cache CacheMode `json:"cache,omitempty"`
	// CacheRead multiplies Input for tokens read from the cache.
	CacheRead float64 `json:"cache_read,omitempty"`
	// CacheWrite5m multiplies Input for tokens written with the default 5-minute TTL.
	CacheWrite5m float64 `json:"cache_write_5m,omitempty"`
	// CacheWrite1h multiplies Input for tokens written with the 1-hour TTL.
	CacheWrite1h float64 `json:"cache_write_1h,omitempty"`
	// MinCacheable is the shortest prefix, in tokens, the provider caches.
	MinCacheable int `json:"min_cacheable,omitempty"`

	order int // position in the table file, for family lookups
}

// Prices is a price table: look a model up with Lookup.
type Prices struct {
	// Defaults fills the cache fields that a model entry leaves out.
	Defaults Price `json:"defaults"`
	// Fallback names the model whose price applies to unknown models.
	Fallback string `json:"fallback"`
	// Models are the per-model entries.
	Models []Price `json:"models"`
}

// PriceError reports an invalid price table.
type PriceError struct {
	// Source names the table (a file name or "embedded").
	Source string
	// Msg says what is wrong.
	Msg string
}

// Error implements error.
func (e *PriceError) Error() string { return "cost: price table " + e.Source + ": " + e.Msg }

// DefaultPrices returns the embedded price table (internal/cost/prices.yaml).
func DefaultPrices() *Prices {
	p, err := ParsePrices("embedded", defaultPricesYAML)
	if err != nil {
		panic(err) // the embedded table is checked by the tests
	}
	return p
}

// LoadPrices reads a price table in the prices.yaml format from a file.
func LoadPrices(path string) (*Prices, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePrices(path, b)
}

// ParsePrices parses a price table in the prices.yaml format (unknown keys are an error),
// applies the defaults and checks every entry.
func ParsePrices(source string, data []byte) (*Prices, error) {
	var p Prices
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, &PriceError{Source: source, Msg: err.Error()}
	}
	if len(p.Models) == 0 {
		return nil, &PriceError{Source: source, Msg: "no models"}
	}
	seen := map[string]bool{}
	for i := range p.Models {
		m := &p.Models[i]
		if m.Match == "" {
			return nil, &PriceError{Source: source, Msg: fmt.Sprintf("models[%d]: empty match", i)}
		}
		if seen[m.Match] {
			return nil, &PriceError{Source: source, Msg: fmt.Sprintf("models[%d]: duplicate match %q", i, m.Match)}
		}
		seen[m.Match] = true
		m.order = i
		if m.Cache == "" {
			m.Cache = p.Defaults.Cache
		}
		if m.Cache == "" {
			m.Cache = CacheAnthropic
		}
		switch m.Cache {
		case CacheAnthropic, CacheAutomatic, CacheNone:
		default:
			return nil, &PriceError{Source: source, Msg: fmt.Sprintf("models[%d] %s: unknown cache mode %q", i, m.Match, m.Cache)}
		}
		if m.CacheRead == 0 {
			m.CacheRead = p.Defaults.CacheRead
		}
		if m.CacheWrite5m == 0 {
			m.CacheWrite5m = p.Defaults.CacheWrite5m
		}
		if m.CacheWrite1h == 0 {
			m.CacheWrite1h = p.Defaults.CacheWrite1h
		}
		if m.MinCacheable == 0 {
			m.MinCacheable = p.Defaults.MinCacheable
		}
		if m.Input < 0 || m.Output < 0 || m.CacheRead < 0 || m.CacheWrite5m < 0 || m.CacheWrite1h < 0 || m.MinCacheable < 0 {
			return nil, &PriceError{Source: source, Msg: fmt.Sprintf("models[%d] %s: negative price", i, m.Match)}
		}
	}
	// Longest prefix first, so Lookup can take the first match.
	sort.SliceStable(p.Models, func(i, j int) bool { return len(p.Models[i].Match) > len(p.Models[j].Match) })
	if p.Fallback != "" {
		if _, ok := p.lookup(p.Fallback); !ok {
			return nil, &PriceError{Source: source, Msg: fmt.Sprintf("fallback %q matches no model", p.Fallback)}
		}
	}
	return &p, nil
}

// Lookup returns the price of a model id: the entry with the longest matching prefix, else
// the entry of its family, else the fallback model's entry (Resolve says which). known is false
// when the model has no entry of its own.
func (p *Prices) Lookup(model string) (price Price, known bool) {
	pr, how := p.Resolve(model)
	return pr, how == PricedExactly
}

// Pricing says how Resolve priced a model.
type Pricing uint8

const (
	// PricedExactly: an entry's match is a prefix of the model id.
	PricedExactly Pricing = iota
	// PricedByFamily: no entry matches, so the first entry (in table order, which lists each
	// family newest first) of the model's family was used.
	PricedByFamily
	// PricedAsFallback: not even the family is in the table: the fallback model was used.
	PricedAsFallback
)

// Resolve returns the price of model and how it was found. An unknown id takes the first entry
// of its family (its digit-free words: "gpt-5.3-codex" → gpt-codex), else of shorter prefixes down
// to the vendor word, where a fallback of that vendor wins ("claude-next" → claude-sonnet-4-5).
func (p *Prices) Resolve(model string) (Price, Pricing) {
	if pr, ok := p.lookup(model); ok {
		return pr, PricedExactly
	}
	fb, _ := p.lookup(p.Fallback)
	words := familyWords(normModel(model))
	for n := len(words); n >= 1; n-- {
		fam := strings.Join(words[:n], "-")
		if n == 1 && fb.Match != "" && familyWords(strings.ToLower(fb.Match))[0] == fam {
			return fb, PricedByFamily
		}
		best := -1
		for i, pr := range p.Models {
			if strings.Join(familyWords(strings.ToLower(pr.Match)), "-") == fam && (best < 0 || pr.order < p.Models[best].order) {
				best = i
			}
		}
		if best >= 0 {
			return p.Models[best], PricedByFamily
		}
	}
	return fb, PricedAsFallback
}

// familyWords returns the '-'-separated words of a model id that hold no digit.
func familyWords(m string) []string {
	var out []string
	for _, w := range strings.Split(m, "-") {
		if w != "" && strings.IndexAny(w, "0123456789") < 0 {
			out = append(out, w)
		}
	}
	return out
}

// normModel lowercases a model id and drops a "provider/" prefix.
func normModel(model string) string {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	return m
}

func (p *Prices) lookup(model string) (Price, bool) {
	m := normModel(model)
	if m == "" {
		return Price{}, false
	}
	for _, pr := range p.Models {
		if match := strings.ToLower(pr.Match); strings.HasPrefix(m, match) && !newerVersion(m[len(match):]) {
			return pr, true
		}
	}
	return Price{}, false
}

// newerVersion reports whether what follows a matched prefix starts another version number
// ("-7" or ".3": claude-opus-4 does not price claude-opus-4-7, nor gpt-5 gpt-5.3), as opposed
// to a date or suffix ("-20250514", "-mini", "[1m]").
func newerVersion(rest string) bool {
	if len(rest) < 2 || (rest[0] != '-' && rest[0] != '.') {
		return false
	}
	n := 0
	for n+1 < len(rest) && rest[n+1] >= '0' && rest[n+1] <= '9' {
		n++
	}
	return n >= 1 && (rest[0] == '.' || n <= 2)
}

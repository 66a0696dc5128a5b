package replay

import (
	"math"
	"sort"
)

// Distribution is one strategy's savings over the sessions of a run, session by session (each
// against the baseline's cost of the same session): what a user replaying their own sessions
// sees, where the total is dominated by the longest sessions.
type Distribution struct {
	// Name is the strategy.
	Name string `json:"name"`
	// Sessions counts the sessions with a positive baseline cost (the others have no saving).
	Sessions int `json:"sessions"`
	// Median, P25, P75, Min and Max are savings fractions (0.4 = 40% cheaper); the quartiles
	// interpolate linearly between the closest ranks.
	Median float64 `json:"median"`
	P25    float64 `json:"p25"`
	P75    float64 `json:"p75"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// Cheaper counts the sessions the strategy made cheaper than the baseline.
	Cheaper int `json:"cheaper"`
	// Savings are the per-session savings, in session order.
	Savings []float64 `json:"savings"`
}

// Distributions returns the per-session savings distribution of every strategy (by
// position), over the sessions replayed without error whose baseline cost is positive.
func Distributions(reps []SessionReport) []Distribution {
	var out []Distribution
	for _, r := range reps {
		if r.Error != "" || len(r.Strategies) == 0 || r.Strategies[0].Cost <= 0 {
			continue
		}
		for i, s := range r.Strategies {
			for len(out) <= i {
				out = append(out, Distribution{Name: s.Name})
			}
			out[i].Savings = append(out[i].Savings, s.Savings)
		}
	}
	for i := range out {
		d := &out[i]
		xs := append([]float64(nil), d.Savings...)
		sort.Float64s(xs)
		d.Sessions = len(xs)
		if len(xs) == 0 {
			continue
		}
		d.Min, d.Max = xs[0], xs[len(xs)-1]
		d.Median, d.P25, d.P75 = quantile(xs, 0.5), quantile(xs, 0.25), quantile(xs, 0.75)
		for _, x := range xs {
			if x > 0.0005 {
				d.Cheaper++
			}
		}
	}
	return out
}

// quantile is the q-quantile of sorted xs, interpolating linearly at position (n-1)·q.
func quantile(xs []float64, q float64) float64 {
	pos := float64(len(xs)-1) * q
	lo := math.Floor(pos)
	i := int(lo)
	if i+1 >= len(xs) {
		return xs[len(xs)-1]
	}
	return xs[i] + (xs[i+1]-xs[i])*(pos-lo)
}

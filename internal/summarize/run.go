package summarize

import (
	"context"
	"sync"
)

// Outcome is the result of one request in a Run: exactly one of Result and Err is set.
type Outcome struct {
	ID     string
	Result *Result
	Err    error
}

// Run summarizes reqs concurrently with at most parallel calls in flight (parallel <= 0 means
// 4) and returns the outcomes in request order. Cancelling ctx stops requests not yet started
// (their Err is ctx.Err()).
func Run(ctx context.Context, s Summarizer, reqs []*Request, parallel int) []Outcome {
	if parallel <= 0 {
		parallel = 4
	}
	out := make([]Outcome, len(reqs))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, r := range reqs {
		out[i].ID = r.ID
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			out[i].Err = ctx.Err()
			continue
		}
		wg.Add(1)
		go func(i int, r *Request) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := ctx.Err(); err != nil {
				out[i].Err = err
				return
			}
			out[i].Result, out[i].Err = s.Summarize(ctx, r)
		}(i, r)
	}
	wg.Wait()
	return out
}

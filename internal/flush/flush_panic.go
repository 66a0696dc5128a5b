package flush

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/condense-dev/condense/internal/summarize"
)

// PanicError is a flush, or one of its summarizer calls, that panicked: a bug, recovered so
// that it fails the flush (OutcomePanic; a queued job counts it as a failed attempt) instead
// of the process.
type PanicError struct {
	Value any    // what was passed to panic
	Stack []byte // the panicking goroutine's stack
}

// Error implements error.
func (e *PanicError) Error() string { return fmt.Sprintf("flush: panic: %v", e.Value) }

// catch runs f and returns its error, or a *PanicError when f panics.
func catch(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return f()
}

// safeSummarizer recovers a panic of a summarizer call (made on a goroutine of
// summarize.Run's, where it would end the process) as a *PanicError.
type safeSummarizer struct{ summarize.Summarizer }

// Summarize implements summarize.Summarizer.
func (s safeSummarizer) Summarize(ctx context.Context, req *summarize.Request) (res *summarize.Result, err error) {
	err = catch(func() (err error) {
		res, err = s.Summarizer.Summarize(ctx, req)
		return err
	})
	return res, err
}

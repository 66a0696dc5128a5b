package main

import (
	"fmt"
	"io"

	"github.com/condense-dev/condense/internal/transcripts"
)

// maxSkippedShown bounds the skipped records named per file.
const maxSkippedShown = 10

// reportSkipped names on w the malformed records an import skipped (file and line) and counts
// them, so that a lenient import never passes over bad input in silence.
func reportSkipped(w io.Writer, file string, skipped []*transcripts.ParseError) {
	if len(skipped) == 0 {
		return
	}
	for i, pe := range skipped {
		if i == maxSkippedShown {
			fmt.Fprintf(w, "skipped: … and %d more\n", len(skipped)-i)
			break
		}
		fmt.Fprintf(w, "skipped: %v\n", pe)
	}
	fmt.Fprintf(w, "%s: %d malformed records skipped (--strict fails on them instead)\n", file, len(skipped))
}

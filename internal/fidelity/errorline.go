package fidelity

// wordKind classifies a word for IsErrorLine: an error word, a word of one of its phrases, or
// any other word.
type wordKind uint8

const (
	wordOther wordKind = iota
	wordError
	wordNot
	wordFound
	wordNo
	wordSuch
	wordSegmentation
	wordFault
	wordExit
	wordCode
	wordStatus
)

// longestWord is the length of the longest word classifyWord knows ("segmentation").
const longestWord = 12

// classifyWord returns the kind of a word already lowercased.
func classifyWord(w []byte) wordKind {
	switch string(w) {
	case "error", "errors", "exception", "fatal", "panic", "fail", "failed", "failure", "fails",
		"traceback", "denied", "cannot", "undefined":
		return wordError
	case "not":
		return wordNot
	case "found":
		return wordFound
	case "no":
		return wordNo
	case "such":
		return wordSuch
	case "segmentation":
		return wordSegmentation
	case "fault":
		return wordFault
	case "exit":
		return wordExit
	case "code":
		return wordCode
	case "status":
		return wordStatus
	}
	return wordOther
}

// IsErrorLine reports whether line holds error evidence: a word error(s) exception fatal panic
// fail(s/ed/ure) traceback denied cannot undefined (runs of [A-Za-z0-9_], any case), or "not
// found", "no such", "segmentation fault", "exit code|status N" (N≠0). It does not allocate.
func IsErrorLine(line string) bool {
	var prev, prev2 wordKind
	var buf [longestWord]byte
	for w, rest := nextWord(line); w != ""; w, rest = nextWord(rest) {
		k := wordOther
		if len(w) <= longestWord {
			lw := buf[:len(w)]
			for n := 0; n < len(w); n++ {
				c := w[n]
				if c >= 'A' && c <= 'Z' {
					c += 'a' - 'A'
				}
				lw[n] = c
			}
			k = classifyWord(lw)
		}
		switch {
		case k == wordError,
			prev == wordNot && k == wordFound,
			prev == wordNo && k == wordSuch,
			prev == wordSegmentation && k == wordFault,
			prev2 == wordExit && (prev == wordCode || prev == wordStatus) && w[0] >= '1' && w[0] <= '9':
			return true
		}
		prev2, prev = prev, k
	}
	return false
}

// nextWord returns the first word of s (a maximal run of [A-Za-z0-9_]; "" when there is none)
// and what follows it.
func nextWord(s string) (w, rest string) {
	i := 0
	for i < len(s) && !isAlnum(s[i]) {
		i++
	}
	j := i
	for j < len(s) && isAlnum(s[j]) {
		j++
	}
	return s[i:j], s[j:]
}

// isAlnum reports whether c is in [A-Za-z0-9_].
func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

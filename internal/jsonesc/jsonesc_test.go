package jsonesc

import (
	"encoding/json"
	"testing"
)

// TestAppendEscapedASCII compares every byte a JSON string must escape with encoding/json:
// the escape decodes back to the byte, and the short forms are the ones encoding/json writes.
func TestAppendEscapedASCII(t *testing.T) {
	for c := 0; c < 0x80; c++ {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		lit := append(append([]byte{'"'}, AppendEscapedASCII(nil, byte(c))...), '"')
		var s string
		if err := json.Unmarshal(lit, &s); err != nil || s != string(rune(c)) {
			t.Fatalf("%#x: %s decodes to %q (%v)", c, lit, s, err)
		}
		want, _ := json.Marshal(string(rune(c)))
		if c != '\b' && c != '\f' && string(lit) != string(want) {
			t.Fatalf("%#x: %s, encoding/json writes %s", c, lit, want)
		}
	}
}

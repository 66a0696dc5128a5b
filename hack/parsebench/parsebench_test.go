package parsebench

import (
	"fmt"

	"reflect"
	"testing"
)

func cases(tb testing.TB) []Case { return Cases(tb) }

// TestParsersAgree checks that every parser finds the same messages, blocks, spans and
// decoded strings as wire.Parse on every case, and rejects a malformed body.
func TestParsersAgree(t *testing.T) {
	for _, c := range cases(t) {
		want, err := wireMsgs(c.Format, c.Body)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range Parsers()[1:] {
			got, err := p.Parse(c.Format, c.Body)
			if err != nil {
				t.Fatalf("%s %s: %v", c.Name, p.Name, err)
			}
			if !p.Spans {
				got = withSpansOf(got, want)
			}
			if len(got) != len(want) {
				t.Fatalf("%s %s: %d messages, want %d", c.Name, p.Name, len(got), len(want))
			}
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("%s %s: message %d:\n got %s\nwant %s", c.Name, p.Name, i, short(got[i]), short(want[i]))
				}
			}
			bad := append(append([]byte(nil), c.Body[:len(c.Body)/2]...), '}')
			if _, err := p.Parse(c.Format, bad); err == nil {
				t.Errorf("%s %s: accepted a truncated body", c.Name, p.Name)
			}
		}
	}
}

// withSpansOf copies want's spans into got, for a parser that has none.
func withSpansOf(got, want []Msg) []Msg {
	for i := range got {
		if i >= len(want) {
			break
		}
		got[i].Start, got[i].End = want[i].Start, want[i].End
		for j := range got[i].Blocks {
			if j < len(want[i].Blocks) {
				got[i].Blocks[j].Start, got[i].Blocks[j].End = want[i].Blocks[j].Start, want[i].Blocks[j].End
			}
		}
	}
	return got
}

func short(m Msg) string {
	s := fmt.Sprintf("%d-%d %s", m.Start, m.End, m.Role)
	for _, b := range m.Blocks {
		t := b.Text
		if len(t) > 60 {
			t = t[:60] + "..."
		}
		s += fmt.Sprintf(" [%d-%d %s id=%q name=%q sig=%q text=%q]", b.Start, b.End, b.Type, b.ID, b.Name, b.Sig, t)
	}
	return s
}

// BenchmarkParse runs every parser on every case: go test -bench . -benchmem -count 6.
func BenchmarkParse(b *testing.B) {
	for _, c := range cases(b) {
		for _, p := range Parsers() {
			b.Run(c.Name+"/"+p.Name, func(b *testing.B) {
				b.SetBytes(int64(len(c.Body)))
				b.ReportAllocs()
				start := cpuNanos()
				for b.Loop() {
					if _, err := p.Parse(c.Format, c.Body); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cpuNanos()-start)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

func TestCasesShape(t *testing.T) {
	for _, c := range cases(t) {
		ms, err := wireMsgs(c.Format, c.Body)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range ms {
			n += len(m.Blocks)
		}
		t.Logf("%s: %d bytes, %d messages, %d blocks", c.Name, len(c.Body), len(ms), n)
	}
}

package logs

import (
	"testing"
	"time"
)

func TestMs(t *testing.T) {
	for d, want := range map[time.Duration]float64{
		0: 0, 1500 * time.Microsecond: 1.5, 2 * time.Second: 2000, 999: 0, 90 * time.Minute: 5.4e6,
	} {
		if got := Ms(d); got != want {
			t.Errorf("Ms(%v) = %v, want %v", d, got, want)
		}
	}
}

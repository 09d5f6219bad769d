package bench

import (
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	rounds := func(secs ...float64) Report {
		var r Report
		for _, s := range secs {
			r.Rounds = append(r.Rounds, Round{Spool: Run{N: 100, Elapsed: time.Duration(s * float64(time.Second))}})
		}
		return r
	}
	rate := func(r Round) float64 { return r.Spool.Rate() }
	for _, c := range []struct {
		secs []float64
		want float64
	}{
		{nil, 0},
		{[]float64{1}, 100},
		{[]float64{4, 1, 2}, 50},      // rates 25, 100, 50
		{[]float64{4, 1, 2, 0.5}, 75}, // rates 25, 100, 50, 200: mean of 50 and 100
	} {
		if got := rounds(c.secs...).Median(rate); got != c.want {
			t.Errorf("Median over %v s = %v, want %v", c.secs, got, c.want)
		}
	}
}

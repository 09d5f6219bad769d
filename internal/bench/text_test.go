package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/internal/sample"
)

// TestReportWrite checks the drain's text: the parameters line names the
// ledger by --db's scheme, a round whose counts are not the generated
// ones says MISMATCH, and several rounds end with their medians.
func TestReportWrite(t *testing.T) {
	round := func(processed int) Round {
		return Round{Spool: Run{N: 100, Elapsed: time.Second}, Got: spool.Stats{Processed: processed}}
	}
	r := Report{Expected: sample.Expected{Unique: 100}, Rounds: []Round{round(100), round(99)}, PeakRSS: 3 << 20}
	var b bytes.Buffer
	r.Write(&b, Options{N: 100, Seed: 1, DB: "postgres://h/db", Relaxed: true})
	out := b.String()
	for _, want := range []string{
		"messages   100 (0% redeliveries, 0% poison, seed 1), a file each, durability relaxed, ledger postgres\n",
		"round      2 of 2\n", "(expected 100/0/0: exact)\n", "(expected 100/0/0: MISMATCH)\n",
		"median of 2 rounds: spool 100 msg/s", "peak RSS   3.0 MiB\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if r.AllExact() {
		t.Error("AllExact with a mismatched round")
	}
}

// TestWatchExact checks that a watch run is exact only when every
// arrival was processed once: none missing, no duplicate, no dead letter.
func TestWatchExact(t *testing.T) {
	ok := WatchReport{Trickle: Latency{N: 2}, Steady: Latency{N: 3}, Stats: spool.Stats{Processed: 5}}
	if !ok.Exact() {
		t.Error("an exact run is not Exact")
	}
	for _, bad := range []WatchReport{
		{Trickle: Latency{N: 2, Missing: 1}, Steady: Latency{N: 3}, Stats: spool.Stats{Processed: 5}},
		{Trickle: Latency{N: 2}, Steady: Latency{N: 3}, Stats: spool.Stats{Processed: 4}},
		{Trickle: Latency{N: 2}, Steady: Latency{N: 3}, Stats: spool.Stats{Processed: 5, Duplicates: 1}},
	} {
		if bad.Exact() {
			t.Errorf("%+v is Exact", bad)
		}
	}
}

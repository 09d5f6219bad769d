package spool

import (
	"context"
	"slices"
	"testing"
)

// progressLedger is a Ledger that keeps the progress written, and
// nothing else (calling any other method panics on the nil interface).
type progressLedger struct {
	Ledger
	written []string
}

func (l *progressLedger) RecordBatch(_ context.Context, batch []*Delivery, _ Work, p BatchProgress) ([]Result, error) {
	if len(batch) != 0 {
		panic("progressLedger records no deliveries")
	}
	l.written = append(l.written, p.Position)
	return nil, nil
}

// TestRecordCallsProgress: a batch file's progress, with a Caller, passes
// only the records settled at the head of the file, however the calls
// finish: a record settled after one that is not moves it nowhere, and
// of a run of such records the window keeps the last alone.
func TestRecordCallsProgress(t *testing.T) {
	l := &progressLedger{}
	b := &batchRun{c: &Consumer{ledger: l}, p: BatchProgress{File: "f", Batch: "b"}}
	r := &callRun{b: b}
	var recs []*recordCall
	for _, after := range []string{"1", "2", "3", "4", "5"} {
		recs = append(recs, &recordCall{br: batchRecord{rec: BatchRecord{After: after}}})
	}
	r.window = slices.Clone(recs)
	steps := []struct {
		settle []int
		want   string
		left   int
	}{
		{[]int{1, 2}, "", 4}, // the first is called still; of 1 and 2, 2 is kept
		{[]int{0}, "3", 2},   // the first three settled
		{[]int{4}, "3", 2},   // the fifth out of order: held by the fourth
		{[]int{3}, "5", 0},
	}
	for i, s := range steps {
		for _, k := range s.settle {
			recs[k].settled = true
		}
		if err := r.advance(context.Background(), true); err != nil {
			t.Fatal(err)
		}
		if got := l.written[len(l.written)-1]; got != s.want || len(r.window) != s.left {
			t.Fatalf("step %d: progress %q with %d records left, want %q with %d", i, got, len(r.window), s.want, s.left)
		}
	}
}

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

// TestRecordCallsOrderKeys: with Ordered, a chunk's records are reserved
// only when no earlier record of their order key is unsettled; a record
// settled for good (a dead letter, a duplicate too) passes its key to the
// next, in file order, across chunks; a record without a key (rejected)
// is never held.
func TestRecordCallsOrderKeys(t *testing.T) {
	r := &callRun{b: &batchRun{}, keys: map[string][]*recordCall{}}
	rec := func(key string) batchRecord {
		d := &Delivery{}
		if key != "-" {
			d.Message = &Message{OrderNo: key}
		}
		return batchRecord{d: d}
	}
	names := func(rcs []*recordCall, all []*recordCall) []int {
		var out []int
		for _, rc := range rcs {
			out = append(out, slices.Index(all, rc))
		}
		return out
	}
	got := r.read([]batchRecord{rec("A"), rec("B"), rec("A"), rec("-"), rec("A"), rec("B")})
	all := slices.Clone(r.window)
	if want := []int{0, 1, 3}; !slices.Equal(names(got, all), want) {
		t.Fatalf("reserved first %v, want %v: the first of each key, and the record without one", names(got, all), want)
	}
	r.settledAs(all[1], OutcomeDeadLetter) // a dead letter passes B on
	r.settledAs(all[0], OutcomeProcessed)
	if want := []int{5, 2}; !slices.Equal(names(r.next, all), want) {
		t.Fatalf("next %v, want %v", names(r.next, all), want)
	}
	r.next = nil
	more := r.read([]batchRecord{rec("B"), rec("C")})
	all = append(all, r.window[len(all):]...)
	if want := []int{7}; !slices.Equal(names(more, all), want) {
		t.Fatalf("reserved %v of the next chunk, want %v: B's waits for the one before it", names(more, all), want)
	}
	r.settledAs(all[5], OutcomeDuplicate)
	if want := []int{6}; !slices.Equal(names(r.next, all), want) || r.unsettled != 5 {
		t.Fatalf("next %v with %d unsettled, want %v with 5", names(r.next, all), r.unsettled, want)
	}
}

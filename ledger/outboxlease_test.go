package ledger

import (
	"reflect"
	"testing"
)

// TestIDRuns: runs of minRun consecutive ids or more come as ranges, the
// rest as ids, duplicates once, in order.
func TestIDRuns(t *testing.T) {
	var ids []int64
	for id := int64(100 + minRun - 1); id >= 100; id-- { // a run, backwards
		ids = append(ids, id)
	}
	for id := int64(200); id < 200+minRun-1; id++ { // one short of a run
		ids = append(ids, id)
	}
	ids = append(ids, 7, 100, 5)
	runs, rest := idRuns(ids)
	if want := [][2]int64{{100, 100 + minRun - 1}}; !reflect.DeepEqual(runs, want) {
		t.Errorf("runs %v, want %v", runs, want)
	}
	want := []int64{5, 7}
	for id := int64(200); id < 200+minRun-1; id++ {
		want = append(want, id)
	}
	if !reflect.DeepEqual(rest, want) {
		t.Errorf("rest %v, want %v", rest, want)
	}
	if runs, rest := idRuns(nil); runs != nil || rest != nil {
		t.Errorf("no ids: %v, %v", runs, rest)
	}
}

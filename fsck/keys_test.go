package fsck

import "testing"

// TestBatchFile: a record's file column names its batch file; other
// names are kept as they are.
func TestBatchFile(t *testing.T) {
	for in, want := range map[string]string{
		"orders.csv#L17": "orders.csv", "orders.xml#E5": "orders.xml", "a.json": "a.json",
		"a#b.json": "a#b.json", "x.csv#L": "x.csv#L", "x.csv#L1a": "x.csv#L1a", "#L3": "#L3", "x.csv#Q3": "x.csv#Q3",
	} {
		if got := batchFile(in); got != want {
			t.Errorf("batchFile(%q) = %q, want %q", in, got, want)
		}
	}
	k := stageKeys(nil, 7, "orders~2.csv")
	if len(k) != 2 || k[1] != recordedKey(7, "orders.csv#L2") {
		t.Errorf("stageKeys of orders~2.csv = %v: want it matched to a record of orders.csv", k)
	}
}

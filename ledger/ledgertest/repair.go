package ledgertest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// repairFile is a file of done/ as fsck --repair hands it to Fsck.RepairDone:
// the message id, its body's amount (another amount: a conflict), its
// name and when it reached done/.
func repairFile(id, amount, name string, at time.Time) ledger.RepairedFile {
	raw := `{"msg_id":"` + id + `","amount":` + amount + `}`
	sum := sha256.Sum256([]byte(raw))
	return ledger.RepairedFile{
		Name: name, Ino: inodes.Add(1), Size: int64(len(raw)), Hash: hex.EncodeToString(sum[:]),
		Message: &spool.Message{MsgID: id, Amount: spool.Amount(amount), Raw: []byte(raw)}, At: at,
	}
}

// repairedView is what a ledger says of msgID: the processed file, and
// each duplicate's file with its conflict mark, sorted.
func repairedView(t *testing.T, db *ledger.DB, msgID string) string {
	t.Helper()
	st, err := db.Messages().Story(t.Context(), msgID, "")
	if err != nil {
		t.Fatal(err)
	}
	if st.Processed == nil {
		return "not processed"
	}
	var dups []string
	for _, d := range st.Deliveries {
		dups = append(dups, fmt.Sprintf("%s %s conflict=%v", d.Outcome, d.File, d.Conflict))
	}
	slices.Sort(dups)
	return "processed " + st.Processed.File + "; " + strings.Join(dups, "; ")
}

// testRepairDoneOrder: Fsck.RepairDone takes, of the files that carry one
// msg_id, the one that reached done/ first (then the first by name) for
// the processed one, and records the others as its duplicates, conflicts
// when their content differs from its, whatever order the files come in
// and however they are split between calls; a processed row that a
// consumer wrote is never taken over.
func testRepairDoneOrder(t *testing.T, db *ledger.DB) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	files := []ledger.RepairedFile{
		repairFile("k", "1", "b.json", t0),                  // the original: earliest
		repairFile("k", "1", "a.json", t0.Add(time.Second)), // a redelivery whose name sorts first
		repairFile("k", "2", "c.json", t0.Add(2*time.Second)),
		repairFile("t", "1", "y.json", t0), // same time: the name decides
		repairFile("t", "3", "x.json", t0),
	}
	want := map[string]string{
		"k": "processed b.json; duplicate a.json conflict=false; duplicate c.json conflict=true",
		"t": "processed x.json; duplicate y.json conflict=true",
	}
	at := t0.Add(time.Hour)
	// The worst order: latest first, one call each.
	for i := len(files) - 1; i >= 0; i-- {
		if _, err := db.Fsck().RepairDone(t.Context(), files[i:i+1], "test", at); err != nil {
			t.Fatalf("Fsck().RepairDone %s: %v", files[i].Name, err)
		}
	}
	for id, w := range want {
		if got := repairedView(t, db, id); got != w {
			t.Errorf("%s repaired latest first: %s\nwant %s", id, got, w)
		}
	}
	// In one call, in order, on a fresh msg_id: the same.
	var one []ledger.RepairedFile
	for _, f := range files[:3] {
		one = append(one, repairFile("k2", string(f.Message.Amount), f.Name, f.At))
	}
	out, err := db.Fsck().RepairDone(t.Context(), one, "test", at)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out, []ledger.RepairOutcome{ledger.RepairedProcessed, ledger.RepairedDuplicate, ledger.RepairedDuplicate}) {
		t.Errorf("Fsck().RepairDone in order: %v", out)
	}
	if got := repairedView(t, db, "k2"); got != want["k"] {
		t.Errorf("k2 repaired in order: %s\nwant %s", got, want["k"])
	}
	// A consumer's processed row stays the processed one, even against a
	// file that reached done/ earlier.
	record(t, db, valid("c1", msg{ID: "u", Amount: "1"}))
	early := repairFile("u", "5", "early.json", t0.Add(-time.Hour))
	if out, err := db.Fsck().RepairDone(t.Context(), []ledger.RepairedFile{early}, "test", at); err != nil || out[0] != ledger.RepairedDuplicate {
		t.Fatalf("Fsck().RepairDone of a consumer's msg_id: %v, %v; want a duplicate", out, err)
	}
	if got := repairedView(t, db, "u"); got != "processed u.json; duplicate early.json conflict=true" {
		t.Errorf("u: %s", got)
	}
}

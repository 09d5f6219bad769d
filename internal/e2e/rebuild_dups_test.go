//go:build linux

package e2e

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	spoolfsck "github.com/spoolq/spool/fsck"
)

// ledgerTimestamp matches a time as the reports print it.
var ledgerTimestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)

// dedupView is what a ledger says of every message of a queue: for each
// msg_id, the processed file (by inode, which the move into done/ keeps)
// with its hash, and each duplicate with its hash and whether it is a
// conflict; and the reports that show it (status's ledger line, dups,
// dups --conflicts, show of the redelivered msg_ids), without the times
// and the duplicates' names, which a rebuild can only estimate (a
// consumer records a duplicate by the name it had in inbox/, a rebuild by
// its name in done/).
type dedupView struct {
	processed  map[string]string   // msg_id → "ino hash"
	duplicates map[string][]string // msg_id → sorted "ino hash conflict"
	reports    []string
}

func readDedupView(t *testing.T, q string, shown []string) dedupView {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(q, "ledger.db")+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v := dedupView{processed: map[string]string{}, duplicates: map[string][]string{}}
	rows, err := db.Query(`SELECT msg_id, ino, content_hash FROM processed`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, hash string
		var ino int64
		if err := rows.Scan(&id, &ino, &hash); err != nil {
			t.Fatal(err)
		}
		v.processed[id] = fmt.Sprint(ino, " ", hash)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	rows, err = db.Query(`SELECT msg_id, ino, content_hash, conflict FROM deliveries WHERE outcome = 'duplicate'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, hash string
		var ino, conflict int64
		if err := rows.Scan(&id, &ino, &hash, &conflict); err != nil {
			t.Fatal(err)
		}
		v.duplicates[id] = append(v.duplicates[id], fmt.Sprint(ino, " ", hash, " conflict=", conflict))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	for _, d := range v.duplicates {
		slices.Sort(d)
	}

	for _, l := range lines(mustRun(t, 0, "status", q).stdout) {
		if strings.HasPrefix(l, "ledger") {
			v.reports = append(v.reports, "status: "+l)
		}
	}
	v.reports = append(v.reports, "dups: "+mustRun(t, 0, "dups", q).stdout)
	var conflicts []string
	r := run(t, "dups", q, "--conflicts")
	if r.code > 1 {
		t.Fatalf("dups --conflicts failed:\n%s", r)
	}
	conflicts = append(conflicts, fmt.Sprint("exit ", r.code))
	for _, l := range lines(r.stdout) {
		// msg_id,processed_file,processed_hash,duplicate_file,duplicate_hash,at
		f := strings.Split(l, ",")
		if len(f) != 6 {
			t.Fatalf("dups --conflicts: a line with %d fields: %q", len(f), l)
		}
		conflicts = append(conflicts, strings.Join([]string{f[0], f[1], f[2], f[4]}, ","))
	}
	slices.Sort(conflicts)
	v.reports = append(v.reports, "dups --conflicts: "+strings.Join(conflicts, " | "))
	for _, id := range shown {
		var ls []string
		for _, l := range lines(mustRun(t, 0, "show", q, id).stdout) {
			l = ledgerTimestamp.ReplaceAllString(l, "TIME")
			if kind, _, _ := strings.Cut(l, " "); kind == "duplicate" || kind == "conflict" {
				// The kind, and the conflict's hash; not the name.
				_, hash, _ := strings.Cut(l, "sha256 ")
				l = kind + " " + hash
			}
			ls = append(ls, l)
		}
		slices.Sort(ls)
		v.reports = append(v.reports, "show "+id+": "+strings.Join(ls, " | "))
	}
	return v
}

// TestRebuildKeepsDuplicates: spool fsck --repair, rebuilding a deleted
// ledger from a queue larger than a repair's batch, records the same
// original, duplicates and conflicts for every message as the consumers
// did: whichever batch of done/ each delivery is read in, and whatever
// their names' order (a redelivery whose name sorts first, in its own
// batch or another, a conflicting one, a redelivery under the original's
// name, two of one message, and an original whose name sorts after its
// duplicate's because both were consumed in one pass).
func TestRebuildKeepsDuplicates(t *testing.T) {
	t.Parallel()
	n := 2*spoolfsck.RepairBatch + 100 // three batches of done/, and the redeliveries in any of them
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	msg := func(i int, amount string) string {
		return orderMessage(fmt.Sprintf("m-%05d", i), fmt.Sprintf("o-%05d", i), 1, amount)
	}
	putMessages(t, q, 0, n, 0)
	// Consumed in the same pass as m00300.json and claimed before it (name
	// order): the original, and m00300.json its duplicate.
	putMessage(t, q, "b-first00300.json", msg(300, "1.00"))
	requireStats(t, "first consume", mustRun(t, 0, "consume", q), consumeStats{Processed: n, Duplicates: 1})

	last := n - 1
	redeliveries := map[string]string{
		"a-again00005.json":                              msg(5, "1.00"),                     // sorts first, same batch of done/
		"a-again" + fmt.Sprintf("%05d", last) + ".json":  msg(last, "1.00"),                  // sorts first, another batch
		"c-again00005.json":                              msg(5, "2.00"),                     // a second, conflicting one
		"z-again00003.json":                              msg(3, "1.00"),                     // sorts last, another batch
		"m00010.json":                                    msg(10, "9.99"),                    // the original's name (m00010~2.json), conflicting
		fmt.Sprintf("m%05d.json", spoolfsck.RepairBatch): msg(spoolfsck.RepairBatch, "1.00"), // the original's name, on a batch boundary
	}
	for name, body := range redeliveries {
		putMessage(t, q, name, body)
	}
	requireStats(t, "second consume", mustRun(t, 0, "consume", q), consumeStats{Duplicates: len(redeliveries)})

	shown := []string{"m-00003", "m-00005", "m-00010", fmt.Sprintf("m-%05d", spoolfsck.RepairBatch), "m-00300", fmt.Sprintf("m-%05d", last)}
	before := readDedupView(t, q, shown)
	if len(before.processed) != n || len(before.duplicates) != 6 {
		t.Fatalf("the consumers recorded %d processed msg_ids and duplicates of %d, want %d and 6", len(before.processed), len(before.duplicates), n)
	}

	removeLedgerFiles(t, filepath.Join(q, "ledger.db"))
	out := repairThenClean(t, q, nil)
	if countContains(out, "rebuilt the ledger") != 1 {
		t.Fatalf("the repair did not rebuild the ledger:\n%s", strings.Join(out, "\n"))
	}
	after := readDedupView(t, q, shown)

	for id, p := range before.processed {
		if after.processed[id] != p {
			t.Errorf("%s: the consumer processed %s, the rebuilt ledger says %q", id, p, after.processed[id])
		}
	}
	if len(after.processed) != len(before.processed) {
		t.Errorf("the rebuilt ledger has %d processed rows, the consumers' had %d", len(after.processed), len(before.processed))
	}
	for id, d := range before.duplicates {
		if !slices.Equal(after.duplicates[id], d) {
			t.Errorf("%s: the consumers recorded the duplicates %q, the rebuilt ledger %q", id, d, after.duplicates[id])
		}
	}
	if len(after.duplicates) != len(before.duplicates) {
		t.Errorf("the rebuilt ledger has duplicates of %d msg_ids, the consumers' of %d", len(after.duplicates), len(before.duplicates))
	}
	for i := range before.reports {
		if i >= len(after.reports) || after.reports[i] != before.reports[i] {
			t.Errorf("report before the ledger was deleted:\n  %s\nafter the rebuild:\n  %s", before.reports[i], after.reports[min(i, len(after.reports)-1)])
		}
	}
	// The rebuilt ledger goes on as the consumers' would: one more
	// redelivery of each kind is a duplicate.
	putMessage(t, q, "d-again00005.json", msg(5, "1.00"))
	putMessage(t, q, "d-again00300.json", msg(300, "1.00"))
	requireStats(t, "consume after the rebuild", mustRun(t, 0, "consume", q), consumeStats{Duplicates: 2})
}

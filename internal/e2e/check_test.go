//go:build linux

package e2e

import (
	"encoding/csv"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// checkFinal checks a drained queue against its corpus: the invariants I1
// to I5 and I7 (docs/DESIGN.md, "Invariants"), read from the directories and
// the ledger, and the report commands' agreement with both. Every check
// reports with t.Errorf so that one run shows all that is wrong.
func checkFinal(t *testing.T, q string, c *corpus) {
	t.Helper()
	checkFinalOn(t, q, c, callLedger{})
}

// checkFinalOn is checkFinal on the ledger l: its --db arguments for the
// reports, its connection for the queries; the queue's own SQLite file
// when l.db is nil.
func checkFinalOn(t *testing.T, q string, c *corpus, l callLedger) {
	t.Helper()

	// I5: nothing left in processing/, not even a session directory.
	requireEmpty(t, q, processing)
	if left := messages(t, q, inbox); len(left) > 0 {
		t.Errorf("inbox/ must be drained, holds %d messages, e.g. %q", len(left), left[0].Name)
	}

	// I1: every delivery is in exactly one of done/ and error/, the right
	// one, none lost and none twice. Files keep their content, so they are
	// matched by name (collision suffix stripped) and content.
	finals := append(messages(t, q, done), messages(t, q, errorStage)...)
	want := map[string][]*genFile{}
	for _, g := range c.files {
		want[g.key()] = append(want[g.key()], g)
	}
	got := map[string][]file{}
	for _, f := range finals {
		got[fileKey(f)] = append(got[fileKey(f)], f)
	}
	var lost, twice, wrong, unknown []string
	for k, gs := range want {
		fs := got[k]
		switch {
		case len(fs) < len(gs):
			lost = append(lost, fmt.Sprintf("%q", gs[0].Name))
		case len(fs) > len(gs):
			var where []string
			for _, f := range fs {
				where = append(where, f.Stage+"/"+f.Name)
			}
			twice = append(twice, fmt.Sprintf("%q in %q", gs[0].Name, where))
		}
		for _, f := range fs {
			if f.Stage != gs[0].Stage {
				wrong = append(wrong, fmt.Sprintf("%q in %s/, want %s/", f.Name, f.Stage, gs[0].Stage))
			}
		}
	}
	for k, fs := range got {
		if _, ok := want[k]; !ok {
			unknown = append(unknown, fmt.Sprintf("%s/%q", fs[0].Stage, fs[0].Name))
		}
	}
	if len(lost) > 0 {
		t.Errorf("I1: %d deliveries lost (in neither done/ nor error/): %s", len(lost), strings.Join(head(lost, 10), ", "))
	}
	if len(twice) > 0 {
		t.Errorf("I1: %d deliveries stored more than once: %s", len(twice), strings.Join(head(twice, 10), ", "))
	}
	if len(wrong) > 0 {
		t.Errorf("I1: %d deliveries in the wrong stage: %s", len(wrong), strings.Join(head(wrong, 10), ", "))
	}
	if len(unknown) > 0 {
		t.Errorf("I1: %d files in done/ or error/ that were never delivered (name or content changed?): %s",
			len(unknown), strings.Join(head(unknown, 10), ", "))
	}
	if len(finals) != len(c.files) {
		t.Errorf("I1: done/ + error/ hold %d messages, %d were delivered", len(finals), len(c.files))
	}
	byKey := map[string]*genFile{}
	for k, gs := range want {
		byKey[k] = gs[0]
	}

	db := l.db
	if db == nil {
		db = openLedger(t, q)
	}

	// I2: one processed row per distinct valid msg_id, with its fields
	// exactly as sent.
	rows := processedRows(t, db)
	if len(rows) != len(c.valid) {
		t.Errorf("I2: processed holds %d rows, want %d (one per distinct valid msg_id)", len(rows), len(c.valid))
	}
	bad := 0
	for id, g := range c.valid {
		r, ok := rows[id]
		switch {
		case !ok:
			t.Errorf("I2: valid msg_id %q (file %q) has no processed row", id, g.Name)
		case r.OrderNo != g.OrderNo || r.Seq != g.Seq || r.Amount != g.Amount || r.Hash != sha256hex(g.Data):
			if bad++; bad <= 10 {
				t.Errorf("I2: processed row of %q = order_no %q seq %d amount %q hash %.12s, want %q %d %q %.12s",
					id, r.OrderNo, r.Seq, r.Amount, r.Hash, g.OrderNo, g.Seq, g.Amount, sha256hex(g.Data))
			}
		}
	}
	for id := range rows {
		if _, ok := c.valid[id]; !ok {
			t.Errorf("I2: processed holds %q, which is no valid message's msg_id", id)
		}
	}

	// Every final file has exactly one delivery record, joined by inode
	// (renames keep it), that agrees with where the file is.
	ds := deliveries(t, db)
	if len(ds) != len(finals) {
		t.Errorf("the ledger records %d claims for %d files in done/ and error/ (one delivery per file)", len(ds), len(finals))
	}
	byIno := map[uint64][]delivery{}
	for _, d := range ds {
		byIno[d.Ino] = append(byIno[d.Ino], d)
	}
	bad = 0
	report := func(format string, args ...any) {
		if bad++; bad <= 20 {
			t.Errorf(format, args...)
		}
	}
	for _, f := range finals {
		g := byKey[fileKey(f)]
		if g == nil {
			continue // reported above
		}
		dd := byIno[f.Ino]
		if len(dd) != 1 {
			report("%s/%q (inode %d) has %d delivery records, want 1: %+v", f.Stage, f.Name, f.Ino, len(dd), dd)
			continue
		}
		d := dd[0]
		if d.File != g.Name {
			report("delivery of %s/%q records file %q, want %q", f.Stage, f.Name, d.File, g.Name)
		}
		switch f.Stage {
		case done:
			// I3: a file in done/ has its msg_id's row.
			if _, ok := rows[g.MsgID]; !ok {
				report("I3: %s/%q: msg_id %q has no processed row", f.Stage, f.Name, g.MsgID)
			}
			if d.Outcome != "processed" && d.Outcome != "duplicate" {
				report("%s/%q: delivery outcome %q, want processed or duplicate", f.Stage, f.Name, d.Outcome)
			}
			if d.MsgID != g.MsgID {
				report("%s/%q: delivery msg_id %q, want %q", f.Stage, f.Name, d.MsgID, g.MsgID)
			}
			if d.Hash != f.Hash {
				report("%s/%q: delivery content_hash %q, want %q", f.Stage, f.Name, d.Hash, f.Hash)
			}
		case errorStage:
			// I4: a dead letter has its record, reason and detail.
			if d.Outcome != "dead-letter" || d.Reason != g.Reason || strings.TrimSpace(d.Detail) == "" {
				report("I4: %s/%q: delivery outcome %q reason %q detail %q, want dead-letter %q with a detail",
					f.Stage, f.Name, d.Outcome, d.Reason, d.Detail, g.Reason)
			}
		}
	}

	// I7: a message is a duplicate only of another delivery, never of its
	// own interrupted claim: exactly one duplicate per redelivery, and the
	// deliveries of one msg_id are distinct files (inodes).
	dups := count(t, db, `SELECT COUNT(*) FROM deliveries WHERE outcome = 'duplicate'`)
	if dups != c.redeliveries() {
		t.Errorf("I7: %d duplicate deliveries recorded, want %d (the redelivered files)", dups, c.redeliveries())
	}
	processedDeliveries := count(t, db, `SELECT COUNT(*) FROM claims WHERE outcome = 'processed'`)
	if processedDeliveries != len(c.valid) {
		t.Errorf("%d processed deliveries recorded, want %d", processedDeliveries, len(c.valid))
	}
	inos := map[string]map[uint64]bool{}
	for _, d := range ds {
		if d.Outcome == "dead-letter" {
			continue
		}
		if inos[d.MsgID] == nil {
			inos[d.MsgID] = map[uint64]bool{}
		}
		if inos[d.MsgID][d.Ino] {
			t.Errorf("I7: msg_id %q: file %q (inode %d) delivered twice as processed/duplicate: a duplicate of itself", d.MsgID, d.File, d.Ino)
		}
		inos[d.MsgID][d.Ino] = true
	}
	byClaim := map[string]delivery{}
	for _, d := range ds {
		byClaim[d.Claim] = d
	}
	bad = 0
	for id, r := range rows {
		if d, ok := byClaim[r.Claim]; !ok || d.Outcome != "processed" || d.MsgID != id {
			report("processed row %q names claim %q, whose delivery record is %+v (found: %v), want its processed delivery", id, r.Claim, d, ok)
		}
	}

	// The reports agree with the directories and the ledger.
	r := mustRun(t, 0, append([]string{"dups", q}, l.args...)...)
	if got, want := lines(r.stdout), c.dupIDs(); !slices.Equal(got, want) {
		t.Errorf("spool dups: got %d ids %q, want %d %q", len(got), head(got, 10), len(want), head(want, 10))
	}
	checkErrorsReport(t, q, byKey, l.args...)
	r = mustRun(t, 0, "lag", q, "0")
	if want := fmt.Sprintf("inbox=0 processing=0 error=%d\n", c.count(errorStage)); r.stdout != want {
		t.Errorf("spool lag: got %q, want %q", r.stdout, want)
	}
	r = mustRun(t, 0, append([]string{"order-check", q}, l.args...)...)
	if r.stdout != "OK\n" {
		t.Errorf("spool order-check: got %q, want %q (every order's seqs are 1..n)", r.stdout, "OK\n")
	}

	// Symlink targets outside the queue are untouched, never read (their
	// access time is checked before the test reads them itself).
	for path, o := range c.outside {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Errorf("symlink target %s outside the queue: %v", path, err)
			continue
		}
		if st.Atim != o.ATime {
			t.Errorf("symlink target %s outside the queue was read through the link (access time %v -> %v)", path, o.ATime, st.Atim)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != string(o.Data) {
			t.Errorf("symlink target %s outside the queue was changed: %v", path, err)
		}
	}
}

// checkErrorsReport checks spool errors against error/: CSV file,reason, one
// row per file there, with the reason its delivery must have had.
func checkErrorsReport(t *testing.T, q string, byKey map[string]*genFile, dbArgs ...string) {
	t.Helper()
	r := mustRun(t, 0, append([]string{"errors", q}, dbArgs...)...)
	recs, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
	if err != nil {
		t.Errorf("spool errors: not CSV: %v\n%s", err, r.stdout)
		return
	}
	if len(recs) == 0 || !slices.Equal(recs[0], []string{"file", "reason"}) {
		t.Errorf("spool errors: want header file,reason, got %q", head(lines(r.stdout), 1))
		return
	}
	got := map[string]string{}
	for _, rec := range recs[1:] {
		// A name holding a control character or bytes that are not UTF-8
		// is listed Go-quoted (report.Terminal).
		name := rec[0]
		if u, err := strconv.Unquote(name); err == nil && strings.HasPrefix(name, `"`) {
			name = u
		}
		if _, dup := got[name]; dup {
			t.Errorf("spool errors lists %q twice", name)
		}
		got[name] = rec[1]
	}
	files := messages(t, q, errorStage)
	if len(got) != len(files) {
		t.Errorf("spool errors lists %d files, error/ holds %d", len(got), len(files))
	}
	bad := 0
	for _, f := range files {
		g := byKey[fileKey(f)]
		if g == nil {
			continue
		}
		if reason, ok := got[f.Name]; !ok || reason != g.Reason {
			if bad++; bad <= 10 {
				t.Errorf("spool errors: %q has reason %q (listed: %v), want %q", f.Name, reason, ok, g.Reason)
			}
		}
	}
}

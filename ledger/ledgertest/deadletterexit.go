package ledgertest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// testDeadLetterExits: a dead letter whose file was edited to a new inode
// leaves the dead-letter index when a file of its name is replayed or
// discarded, unless two current records share the name; one retired by
// DeadLetters.Retire leaves it, once however often it is retired; a page
// read with a Check is filled past the records it leaves out, and the
// groups count only those it keeps.
func testDeadLetterExits(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	var batch []*spool.Delivery
	for i, name := range []string{"a.json", "b.json", "c.json", "dup.json", "dup.json", "e.json", "f.json", "g.json"} {
		d := rejected(fmt.Sprintf("c%d", i), name, uint64(200+i), spool.ReasonParse, "", fmt.Sprintf("bad byte at offset %d", i))
		d.At = base.Add(time.Duration(i) * time.Minute)
		batch = append(batch, d)
	}
	record(t, db, batch...)
	ids := map[string]int64{}
	rows := column(t, db, `SELECT claim FROM deliveries ORDER BY id`)
	for i, id := range column(t, db, `SELECT id FROM deliveries ORDER BY id`) {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ids[rows[i]] = n
	}
	current := func() string {
		t.Helper()
		var claims []string
		for before := int64(0); ; {
			page, next, err := db.DeadLetters().Page(ctx, ledger.DeadLetterQuery{Limit: 3, Before: before})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page {
				claims = append(claims, r.Claim)
			}
			if next == 0 {
				return strings.Join(claims, " ")
			}
			before = next
		}
	}
	at := base.Add(time.Hour)
	// a.json edited (inode 900) and replayed; dup.json edited and replayed:
	// two records of that name, which one moved is unknown; a file that
	// got a collision suffix is not tied to its record either.
	for _, r := range []ledger.Replay{
		{File: "a.json", NewName: "a.json", Ino: 900, By: "op", At: at},
		{File: "dup.json", NewName: "dup.json", Ino: 901, By: "op", At: at},
		{File: "e~2.json", NewName: "e.json", Ino: 903, By: "op", At: at},
	} {
		if err := db.Replays().Record(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// b.json edited (inode 902) and discarded.
	st, err := db.Tasks().Start(ctx, ledger.TaskStart{
		Task: ledger.TaskRecord{Kind: "discard", Request: `{"kind":"discard","selection":{"names":["b.json"]}}`, Files: 1, Digest: "db",
			By: "op", Via: ledger.AuditCLI, Note: "poison"},
		Files: []ledger.TaskFile{{Idx: 0, File: "b.json", Ino: 902, ContentHash: "bb", Size: 1, Reason: string(spool.ReasonParse)}},
		Move: ledger.TaskMove{Kind: "discard", By: "op", Note: "poison", At: at, Discard: []ledger.DiscardItem{{Idx: 0, File: "b.json", Ino: 902,
			Reason: string(spool.ReasonParse), ContentHash: "bb", Size: 1}}},
		Audit: ledger.AuditEntry{Actor: "op", Via: ledger.AuditCLI, Action: "discard", Selection: `{}`},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Discards().Finish(ctx, st.Move, []ledger.DiscardItem{{Idx: 0, File: "b.json", Ino: 902, Outcome: ledger.DiscardDeleted}}, at); err != nil {
		t.Fatal(err)
	}
	if got, want := current(), "c7 c6 c5 c4 c3 c2"; got != want {
		t.Errorf("after the edited replay and discard: %q, want %q", got, want)
	}
	// c.json removed by hand, found by fsck --repair; retired twice.
	for range 2 {
		if err := db.DeadLetters().Retire(ctx, []int64{ids["c2"]}, ledger.ExitRemoved, "fsck", at); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := current(), "c7 c6 c5 c4 c3"; got != want {
		t.Errorf("after DeadLetters().Retire: %q, want %q", got, want)
	}
	if got := column(t, db, `SELECT how FROM dead_letter_exits ORDER BY delivery_id`); !slices.Equal(got, []string{"replayed", "discarded", "removed"}) {
		t.Errorf("exits = %q", got)
	}
	if err := db.DeadLetters().Retire(ctx, []int64{ids["c0"]}, "gone", "fsck", at); err == nil {
		t.Error("DeadLetters().Retire took an exit of no kind")
	}

	// A check that finds only e.json and g.json: the page of 1 skips f.json.
	check := func(_ context.Context, files []ledger.DeadLetterFile) ([]bool, error) {
		out := make([]bool, len(files))
		for i, f := range files {
			out[i] = f.File == "e.json" || f.File == "g.json"
		}
		return out, nil
	}
	var got []string
	for before := int64(0); ; {
		page, next, err := db.DeadLetters().Page(ctx, ledger.DeadLetterQuery{Limit: 1, Before: before, Check: check})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			got = append(got, r.File)
		}
		if next == 0 {
			break
		}
		before = next
	}
	if want := []string{"g.json", "e.json"}; !slices.Equal(got, want) {
		t.Errorf("checked pages = %q, want %q", got, want)
	}
	groups, err := db.DeadLetters().Groups(ctx, check)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || groups[0].Count != 2 {
		t.Errorf("checked groups = %+v, want one of 2", groups)
	}
	var all []string
	if err := db.DeadLetters().Current(ctx, func(files []ledger.DeadLetterFile) error {
		for _, f := range files {
			all = append(all, f.File)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"g.json", "f.json", "e.json", "dup.json", "dup.json"}; !slices.Equal(all, want) {
		t.Errorf("DeadLetters().Current = %q, want %q", all, want)
	}
	still, err := db.DeadLetters().StillCurrent(ctx, []int64{ids["c0"], ids["c2"], ids["c5"], ids["c7"]})
	if err != nil || len(still) != 2 || !still[ids["c5"]] || !still[ids["c7"]] {
		t.Errorf("DeadLetters().StillCurrent = %v, %v; want those of c5 and c7", still, err)
	}
	names, err := db.DeadLetters().Names(ctx, []uint64{200, 900, 204})
	if err != nil || len(names) != 2 || names[200][0] != "a.json" || names[204][0] != "dup.json" {
		t.Errorf("DeadLetters().Names = %v, %v", names, err)
	}
	exits, err := db.DeadLetters().ErrorExits(ctx)
	if err != nil || len(exits) != 4 {
		t.Errorf("DeadLetters().ErrorExits = %+v, %v; want the 3 replays and the discard", exits, err)
	}
}

// testDeadLetterInodeReused: a file edited in error/ may get the inode of
// a file that left the queue before it (sed -i writes a new file, and the
// file system hands out freed inode numbers again). A record retired
// already under that old inode does not tie the moved file to it: the
// edited file's own record leaves the index when it is discarded or
// replayed. (CI saw it: fsck called a discarded edit dead-letter-replaced.)
func testDeadLetterInodeReused(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	var batch []*spool.Delivery
	for i, name := range []string{"a.json", "d.json", "e.json", "f.json"} {
		d := rejected(fmt.Sprintf("r%d", i), name, uint64(300+i), spool.ReasonMissingField, "order_no", "")
		d.At = base.Add(time.Duration(i) * time.Minute)
		batch = append(batch, d)
	}
	record(t, db, batch...)
	current := func() []string {
		t.Helper()
		var files []string
		if err := db.DeadLetters().Current(ctx, func(fs []ledger.DeadLetterFile) error {
			for _, f := range fs {
				files = append(files, f.File)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(files)
		return files
	}
	at := base.Add(time.Hour)
	// a.json edited (inode 900) and replayed: its record leaves by name,
	// and its old inode 300 is free.
	if err := db.Replays().Record(ctx, ledger.Replay{File: "a.json", NewName: "a.json", Ino: 900, By: "op", At: at}); err != nil {
		t.Fatal(err)
	}
	// d.json edited into inode 300 and discarded.
	at = at.Add(time.Minute)
	st, err := db.Tasks().Start(ctx, ledger.TaskStart{
		Task: ledger.TaskRecord{Kind: "discard", Request: `{"kind":"discard","selection":{"names":["d.json"]}}`, Files: 1, Digest: "dd",
			By: "op", Via: ledger.AuditCLI, Note: "given up"},
		Files: []ledger.TaskFile{{Idx: 0, File: "d.json", Ino: 300, ContentHash: "dd", Size: 1, Reason: string(spool.ReasonMissingField)}},
		Move: ledger.TaskMove{Kind: "discard", By: "op", Note: "given up", At: at, Discard: []ledger.DiscardItem{{Idx: 0, File: "d.json", Ino: 300,
			Reason: string(spool.ReasonMissingField), ContentHash: "dd", Size: 1}}},
		Audit: ledger.AuditEntry{Actor: "op", Via: ledger.AuditCLI, Action: "discard", Selection: `{}`},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Discards().Finish(ctx, st.Move, []ledger.DiscardItem{{Idx: 0, File: "d.json", Ino: 300, Outcome: ledger.DiscardDeleted}}, at); err != nil {
		t.Fatal(err)
	}
	if got, want := current(), []string{"e.json", "f.json"}; !slices.Equal(got, want) {
		t.Errorf("after a discard of an edit that reused a retired record's inode: current %q, want %q", got, want)
	}
	// e.json edited into inode 301 (d.json's, retired above) and replayed.
	at = at.Add(time.Minute)
	if err := db.Replays().Record(ctx, ledger.Replay{File: "e.json", NewName: "e.json", Ino: 301, By: "op", At: at}); err != nil {
		t.Fatal(err)
	}
	if got, want := current(), []string{"f.json"}; !slices.Equal(got, want) {
		t.Errorf("after a replay of an edit that reused a retired record's inode: current %q, want %q", got, want)
	}
	// f.json replayed as it was (its own inode): it leaves by its inode.
	if err := db.Replays().Record(ctx, ledger.Replay{File: "f.json", NewName: "f.json", Ino: 303, By: "op", At: at.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if got := current(); len(got) != 0 {
		t.Errorf("after a replay of an unedited file: current %q, want none", got)
	}
}

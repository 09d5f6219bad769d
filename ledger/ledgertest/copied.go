package ledgertest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// testEachDeadLetterFile: DeadLetters.EachFile lists the inode and file of
// every dead-letter record, inodes above int64 intact, and no other
// delivery (fsck matches the files of a copied error/ to them by name).
func testEachDeadLetterFile(t *testing.T, db *ledger.DB) {
	const big = uint64(1)<<63 + 7
	record(t, db,
		rejected("c1", "a.json", 42, spool.ReasonParse, "", "first"),
		rejected("c2", "a~2.json", 42, spool.ReasonMissingField, "amount", "second"),
		rejected("c3", "huge.json", big, spool.ReasonTooLarge, "", "2000000 bytes"))
	p := valid("c4", msg{ID: "m1"})
	p.Ino = 43
	record(t, db, p)
	var got []string
	err := db.DeadLetters().EachFile(t.Context(), func(ino uint64, file string) error {
		got = append(got, fmt.Sprintf("%d %s", ino, file))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := []string{"42 a.json", "42 a~2.json", fmt.Sprintf("%d huge.json", big)}
	if !slices.Equal(got, want) {
		t.Errorf("DeadLetters().EachFile = %q, want %q", got, want)
	}
}

package ledgertest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// testDeadLetterPage: DeadLetters.Page lists the current dead letters
// newest first a page at a time, leaving out one replayed, one
// discarded and the older record of one dead-lettered again (its newer record is listed);
// its filters keep what they say (a LIKE wildcard in the text is a plain
// character, case is ignored); DeadLetters.Groups counts them by reason and signature.
func testDeadLetterPage(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	var batch []*spool.Delivery
	for i := range 9 {
		reason, detail := spool.ReasonParse, fmt.Sprintf("bad byte at offset %d", i)
		if i%3 == 0 {
			reason, detail = spool.ReasonHandler, fmt.Sprintf("order o-%d: 100%% refused", i)
		}
		d := rejected(fmt.Sprintf("c%d", i), fmt.Sprintf("f%d.json", i), uint64(100+i), reason, "", detail)
		d.At = base.Add(time.Duration(i) * time.Minute)
		batch = append(batch, d)
	}
	record(t, db, batch...)
	// f1 replayed, f2 dead-lettered again under a new claim.
	if err := db.Replays().Record(ctx, ledger.Replay{File: "f1.json", NewName: "f1.json", Ino: 101, By: "op", At: base.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	again := rejected("c2b", "f2.json", 102, spool.ReasonParse, "", "bad byte at offset 2")
	again.At = base.Add(30 * time.Minute)
	record(t, db, again)
	// f4 discarded (a batch begun is enough: its file left error/).
	if _, err := startDiscard(t, db, "op", "poison", "", base.Add(2*time.Hour),
		[]ledger.DiscardItem{{Idx: 0, File: "f4.json", Ino: 104, Reason: string(spool.ReasonParse), ContentHash: "44", Size: 1}}); err != nil {
		t.Fatal(err)
	}

	var got []string
	for before := int64(0); ; {
		page, next, err := db.DeadLetters().Page(ctx, ledger.DeadLetterQuery{Limit: 3, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			got = append(got, r.Claim)
		}
		if next == 0 {
			break
		}
		before = next
	}
	if want := "c2b c8 c7 c6 c5 c3 c0"; strings.Join(got, " ") != want {
		t.Errorf("pages = %q, want %q", got, want)
	}
	for _, c := range []struct {
		q    ledger.DeadLetterQuery
		want string
	}{
		{ledger.DeadLetterQuery{Reason: "handler"}, "c6 c3 c0"},
		{ledger.DeadLetterQuery{Text: "o-3"}, "c3"},
		{ledger.DeadLetterQuery{Text: "100%"}, "c6 c3 c0"},
		{ledger.DeadLetterQuery{Text: "0_"}, ""},
		{ledger.DeadLetterQuery{Detail: "offset 5"}, "c5"},
		// Without case on every engine, as the console's detail_match
		// "(?i)..." of a task selects.
		{ledger.DeadLetterQuery{Detail: "OFFSET 5"}, "c5"},
		{ledger.DeadLetterQuery{Text: "O-3"}, "c3"},
		{ledger.DeadLetterQuery{Since: base.Add(4 * time.Minute), Until: base.Add(7 * time.Minute)}, "c6 c5"},
	} {
		page, _, err := db.DeadLetters().Page(ctx, c.q)
		if err != nil {
			t.Fatal(err)
		}
		var claims []string
		for _, r := range page {
			claims = append(claims, r.Claim)
		}
		if strings.Join(claims, " ") != c.want {
			t.Errorf("DeadLetters().Page(%+v) = %q, want %q", c.q, claims, c.want)
		}
	}
	groups, err := db.DeadLetters().Groups(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var gs []string
	for _, g := range groups {
		gs = append(gs, fmt.Sprintf("%s %q %d", g.Reason, g.Signature, g.Count))
	}
	if want := `parse "bad byte at offset #" 4|handler "order o-#: #% refused" 3`; strings.Join(gs, "|") != want {
		t.Errorf("groups = %q, want %q", gs, want)
	}
}

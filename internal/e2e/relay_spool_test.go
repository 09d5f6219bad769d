//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/testenv"
)

// TestRelaySpoolToSpool: spool init R, spool relay Q --to dir://R, spool
// consume R, with no further setup: R's default contract takes every
// event (msg_id the event id, order_no the aggregate, seq the outbox row
// id, amount the payload's or 0), so every event is processed and none
// is dead-lettered; the ledger of R has each aggregate's events under its
// order_no in row order, and a payload's amount kept exactly.
func TestRelaySpoolToSpool(t *testing.T) {
	t.Parallel()
	n := testenv.Pick(600, 120)
	q, id := outboxQueue(t, n, 4)
	db := openLedgerRW(t, filepath.Join(q, "ledger.db"))
	if _, err := db.Exec(`INSERT INTO outbox (aggregate, type, payload) VALUES ('a01', 'payment', '{"amount":"12.50","n":-1}')`); err != nil {
		t.Fatal(err)
	}
	n++
	r := filepath.Join(t.TempDir(), "r")
	mustRun(t, 0, "init", r)
	if res := mustRun(t, 0, "relay", q, "--to", "dir://"+r); res.stdout != fmt.Sprintf("published=%d failed=0 parked=0\n", n) {
		t.Fatalf("relay:\n%s", res)
	}
	st := parseStats(t, mustRun(t, 0, "consume", r))
	if st.Processed != n || st.DeadLetters != 0 || st.Duplicates != 0 {
		t.Fatalf("consume of the receiving queue: %+v, want %d processed and no dead letter", st, n)
	}
	rows, err := openLedger(t, r).Query(`SELECT msg_id, order_no, seq, amount FROM processed ORDER BY order_no, seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	last := map[string]int64{}
	amounts := map[string]int{}
	for rows.Next() {
		var msgID, order, amount string
		var seq int64
		if err := rows.Scan(&msgID, &order, &seq, &amount); err != nil {
			t.Fatal(err)
		}
		if msgID != fmt.Sprintf("%s-%020d", id, seq) || seq <= last[order] {
			t.Fatalf("processed %s: order_no %s, seq %d (the last of the aggregate %d)", msgID, order, seq, last[order])
		}
		last[order] = seq
		amounts[amount]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(last) != 4 || amounts["12.50"] != 1 || amounts["0"] != n-1 {
		t.Fatalf("aggregates %v, amounts %v: want 4 aggregates, one 12.50 and the rest 0", last, amounts)
	}
}

// TestRelayDirRefusesContract: a receiving queue whose spool.conf would
// dead-letter the events (it requires a field they do not carry) is
// refused with one line and exit 2, before anything is written there.
//
// So is a queue whose format would never take them (relayed events are
// JSON messages, ID.json files, renamed in without a done-file):
// published, they would wait in its inbox/ for good, marked published at
// the source.
func TestRelayDirRefusesContract(t *testing.T) {
	t.Parallel()
	q, _ := outboxQueue(t, 5, 1)
	for _, c := range []struct{ conf, want string }{
		{`{"required": ["msg_id", "customer"]}`, `requires field "customer"`},
		{`{"format": "csv"}`, `reads csv batch files, and relayed events are JSON messages`},
		{`{"format": "xml", "record": "r"}`, `reads xml batch files`},
		{`{"format": "jsonl"}`, `takes *.jsonl, and relayed events are files named as `},
		{`{"format": "jsonl", "include": ["*.json"], "done_file": "{name}.ok"}`, `takes a file once its done-file ({name}.ok) is there`},
	} {
		r, _ := workQueue(t)
		writeFile(t, r, "spool.conf", c.conf)
		res := mustRun(t, 2, "relay", q, "--to", "dir://"+r)
		if !strings.Contains(res.stderr, c.want) || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 {
			t.Fatalf("%s: want one line saying %q:\n%s", c.conf, c.want, res)
		}
		if des, err := os.ReadDir(filepath.Join(r, inbox)); err != nil || len(des) != 0 {
			t.Fatalf("%s: the receiving inbox/ holds %d files (%v), want none", c.conf, len(des), err)
		}
		if n := pendingRows(t, q); n != 5 {
			t.Fatalf("%s: %d rows pending, want 5", c.conf, n)
		}
	}
	// A JSON Lines queue that takes the events' names reads each as its
	// one record.
	r, _ := workQueue(t)
	writeFile(t, r, "spool.conf", `{"format": "jsonl", "include": ["*.json"]}`)
	mustRun(t, 0, "relay", q, "--to", "dir://"+r)
	if res := mustRun(t, 0, "consume", r); !strings.Contains(res.stdout, "processed=5 duplicates=0 dead-letters=0") {
		t.Fatalf("the JSON Lines queue took the events as:\n%s", res)
	}
}

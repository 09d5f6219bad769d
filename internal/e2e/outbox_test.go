//go:build linux

package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// outboxSQL is the --sql file of the outbox tests: one event per message,
// in the transaction that records it.
const outboxSQL = `INSERT INTO outbox (aggregate, type, payload, msg_id) VALUES (:order_no, 'payment', :payload, :msg_id);
`

// fillOrders puts n messages into q's inbox, spread over orders
// aggregates with seq growing within each, plus a redelivery of every
// tenth under another name; it returns the distinct msg_ids.
func fillOrders(t *testing.T, q string, n, orders int) []string {
	t.Helper()
	return fillOrdersFrom(t, q, 0, n, orders)
}

// fillOrdersFrom is fillOrders of the messages from to from+n-1, so that
// a test can put more behind those it put before.
func fillOrdersFrom(t *testing.T, q string, from, n, orders int) []string {
	t.Helper()
	var ids []string
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("m%05d", i)
		body := orderMessage(id, fmt.Sprintf("o%02d", i%orders), i/orders+1, "1.00")
		putMessage(t, q, fmt.Sprintf("%06d.json", i), body)
		if i%10 == 0 {
			putMessage(t, q, fmt.Sprintf("%06d-again.json", i), body)
		}
		ids = append(ids, id)
	}
	return ids
}

// unqualified is callLedger.table of a ledger whose tables need no schema.
func unqualified(name string) string { return name }

// outboxAgrees checks that q's outbox and processed tables tell the same
// story: one event per processed row, none without one. It returns how
// many processed rows there are.
func outboxAgrees(t *testing.T, l callLedger, when string) int {
	t.Helper()
	// NOT IN a subquery, which every engine reads once (SQLite into a
	// temporary index), not NOT EXISTS: outbox has no index on msg_id,
	// and SQLite scanned it once a processed row, which under the race
	// detector (the test's own SQLite is Go code) took minutes at the
	// long size.
	var processed, events, orphans, missing, twice int
	err := l.db.QueryRow(fmt.Sprintf(`SELECT
	    (SELECT COUNT(*) FROM %[1]s),
	    (SELECT COUNT(*) FROM %[2]s),
	    (SELECT COUNT(*) FROM %[2]s o WHERE o.msg_id IS NULL OR o.msg_id NOT IN (SELECT msg_id FROM %[1]s)),
	    (SELECT COUNT(*) FROM %[1]s p WHERE p.msg_id NOT IN (SELECT msg_id FROM %[2]s WHERE msg_id IS NOT NULL)),
	    (SELECT COUNT(*) FROM (SELECT msg_id FROM %[2]s GROUP BY msg_id HAVING COUNT(*) > 1) x)`,
		l.table("processed"), l.table("outbox"))).Scan(&processed, &events, &orphans, &missing, &twice)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	if orphans != 0 || missing != 0 || twice != 0 || events != processed {
		t.Fatalf("%s: %d processed rows, %d outbox rows; %d events without their processed row, %d processed rows without their event, %d msg_ids with more than one event",
			when, processed, events, orphans, missing, twice)
	}
	return processed
}

// TestOutboxCommitsWithMessage: consumers running a --sql handler that
// writes an outbox row are killed with SIGKILL at random instants; after
// every kill, and after the clean run that drains the queue, each
// processed row has exactly its one event and no event lacks its
// processed row. It runs on the queue's SQLite ledger and, with their
// servers' variables, on a PostgreSQL schema and a MariaDB database.
func TestOutboxCommitsWithMessage(t *testing.T) {
	t.Parallel()
	for _, engine := range []ledgerBackend{sqliteEngine, postgresEngine, mysqlEngine} {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			testOutboxCommitsWithMessage(t, engine)
		})
	}
}

func testOutboxCommitsWithMessage(t *testing.T, engine ledgerBackend) {
	rng := newRand(t)
	q, state := workQueue(t)
	l := engine.crash(t, q)
	if l.db == nil {
		l = callLedger{db: openLedgerRW(t, filepath.Join(q, "ledger.db")), table: unqualified}
	} else {
		// The ledger's tables exist before the first kill can land.
		mustRun(t, 0, append([]string{"init", q}, l.args...)...)
	}
	sqlFile := writeFile(t, state, "outbox.sql", outboxSQL)
	per := testenv.Pick(3000, 600)
	ids := fillOrders(t, q, per, 7)
	kills, want := 0, testenv.Pick(40, 12)
	// The kills are drawn up to hi, which shrinks to the time of any run
	// that finished first; a queue drained before the kills are done gets
	// more messages (on a quiet machine a run drains 600 in 50 ms).
	hi := 400 * time.Millisecond
	for run := 0; kills < want && run < 200; run++ {
		args := append([]string{"consume", q, "--sql", sqlFile, "--batch", strconv.Itoa(1 + rng.IntN(32))}, l.args...)
		began := time.Now()
		p := start(t, args...)
		if p.killAfter(t, logDelay(rng, 5*time.Millisecond, hi)) {
			kills++
			outboxAgrees(t, l, fmt.Sprintf("after kill %d", kills))
		} else if r := p.result(); r.code != 0 {
			t.Fatalf("consumer failed:\n%s", r)
		} else {
			hi = max(min(hi, time.Since(began)), 10*time.Millisecond)
		}
		if countNames(t, q, inbox)+countClaims(t, q) == 0 {
			ids = append(ids, fillOrdersFrom(t, q, len(ids), per, 7)...)
		}
	}
	mustRun(t, 0, append([]string{"consume", q, "--sql", sqlFile}, l.args...)...)
	if n := outboxAgrees(t, l, "after the clean run"); n != len(ids) {
		t.Fatalf("%d processed rows, want %d", n, len(ids))
	}
	if n := countNames(t, q, done); n != len(ids)+len(ids)/10 {
		t.Errorf("done/ holds %d files, want %d", n, len(ids)+len(ids)/10)
	}
	t.Logf("%d kills of a live consumer", kills)
	if kills == 0 {
		t.Fatal("no kill hit a live consumer")
	}
}

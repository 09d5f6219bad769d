//go:build linux

package e2e

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spoolq/spool/internal/testenv"
)

// TestRelayMariaDBTwoRelays: the outbox of a MariaDB ledger. Two
// consumers at once run a --sql handler that emits an event per message
// over seven aggregates, so that transactions emitting for one aggregate
// overlap, while a relay publishes into another spool queue as the rows
// commit (the overlap is exercised here; it is too brief to meet the
// commit-order gap by chance, which TestConformance/OutboxCommitOrder
// makes happen on purpose). Then two relays at once are
// killed at random and run to the end. Every message has its one event;
// at the receiver each aggregate's events are first seen in row order,
// and its ledger makes each event once. Needs SPOOL_TEST_MYSQL (required
// on CI).
func TestRelayMariaDBTwoRelays(t *testing.T) {
	t.Parallel()
	dsn, db := mysqlDatabase(t)
	rng := newRand(t)
	q, state := workQueue(t)
	mustRun(t, 0, "init", q, "--db", dsn)
	sqlFile := writeFile(t, state, "outbox.sql", outboxSQL)
	ids := fillOrders(t, q, testenv.Pick(2000, 300), 7)
	b, _ := workQueue(t)
	writeFile(t, b, "spool.conf", `{"required": ["msg_id"]}`)
	testRelayWhileEmitting(t, db, q, b, dsn, sqlFile)
	if n := outboxAgrees(t, callLedger{db: db, table: unqualified}, "after the consumers"); n != len(ids) {
		t.Fatalf("%d processed rows, want %d", n, len(ids))
	}
	pending := func() int {
		var p int
		if err := db.QueryRow(`SELECT COUNT(*) FROM outbox WHERE published_at IS NULL`).Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Put the rows back to be published again, by relays killed at
	// random: the receiver gets every event again at least once, its
	// ledger takes none twice.
	if _, err := db.Exec(`UPDATE outbox SET published_at = NULL`); err != nil {
		t.Fatal(err)
	}
	relayKillsOn(t, rng, pending, q, "dir://"+b, 2, testenv.Pick(30, 5), "--db", dsn)

	idBytes, err := os.ReadFile(filepath.Join(q, "queue.id"))
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(idBytes))
	got := dirReceived(t, b)
	repeats := checkEvents(t, outboxEvents(t, db, "outbox", id), len(ids), got)
	r := mustRun(t, 0, "consume", b)
	if st := parseStats(t, r); st.Processed != len(ids) || st.Duplicates != repeats {
		t.Fatalf("the receiving queue: %+v, want %d processed and %d duplicates", st, len(ids), repeats)
	}
}

// testRelayWhileEmitting runs two consumers of q at once (its ledger at
// dsn, the --sql handler sqlFile) to the end, with a relay of q to
// dir://b watching meanwhile; it stops the relay once the consumers are
// done and every row is published.
func testRelayWhileEmitting(t *testing.T, db *sql.DB, q, b, dsn, sqlFile string) {
	t.Helper()
	relay := start(t, "relay", q, "--to", "dir://"+b, "--watch", "--poll", "5ms", "--db", dsn)
	cs := []*proc{
		start(t, "consume", q, "--db", dsn, "--sql", sqlFile, "--batch", "1"),
		start(t, "consume", q, "--db", dsn, "--sql", sqlFile, "--batch", "2"),
	}
	for _, c := range cs {
		if r := c.wait(t); r.code != 0 {
			t.Fatalf("consumer:\n%s", r)
		}
	}
	waitFor(t, cmdTimeout, "the watching relay to publish every row", func() bool {
		var p int
		if err := db.QueryRow(`SELECT COUNT(*) FROM outbox WHERE published_at IS NULL`).Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p == 0
	})
	if err := relay.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := relay.wait(t); r.code != 0 {
		t.Fatalf("watching relay:\n%s", r)
	}
}

//go:build linux

package e2e

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// outboxQueue makes a queue whose ledger's outbox holds n rows spread
// over aggs aggregates (a00, a01...), each row's payload naming its
// aggregate and its place in it; it returns the queue and its identity.
func outboxQueue(t *testing.T, n, aggs int) (q, id string) {
	t.Helper()
	q, _ = workQueue(t)
	mustRun(t, 0, "status", q)
	db := openLedgerRW(t, filepath.Join(q, "ledger.db"))
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		agg := fmt.Sprintf("a%02d", i%aggs)
		if _, err := tx.Exec(`INSERT INTO outbox (aggregate, type, payload) VALUES (?, 'payment', ?)`,
			agg, fmt.Sprintf(`{"agg":%q,"n":%d}`, agg, i/aggs)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT value FROM meta WHERE name = 'queue_id'`).Scan(&id); err != nil {
		t.Fatalf("queue identity: %v", err)
	}
	return q, id
}

// relayKills runs relays of q to target, relays at once, and kills each
// with SIGKILL, until kills kills hit a live relay; then it runs relays at
// once to the end, which must exit 0 with every row published. A third of
// the kills come after a blind random delay (start-up, the first
// batch); the others a random moment after the first rows were marked
// published, in the middle of later batches. Each run draws its --batch
// and its --window (1 to 256 events in flight).
// extra are more flags for every relay.
func relayKills(t *testing.T, rng *rand.Rand, q, target string, relays, kills int, extra ...string) {
	t.Helper()
	relayKillsOn(t, rng, func() int { return pendingRows(t, q) }, q, target, relays, kills, extra...)
}

// relayKillsOn is relayKills with pending counting the unpublished rows
// of the queue's ledger, wherever it is (--db in extra).
func relayKillsOn(t *testing.T, rng *rand.Rand, pending func() int, q, target string, relays, kills int, extra ...string) {
	t.Helper()
	args := append([]string{"relay", q, "--to", target, "--lease", "1s", "--poll", "20ms", "--retry-base", "20ms"}, extra...)
	// The storm runs the plain build: under -race a relay is ten times
	// slower, and CI's long storm (2 000 events through a target that
	// fails one request in six) then outlasted cmdTimeout beside the other
	// tests. The race detector sees the relay in the other relay tests.
	sp := spoolAt{bin: plainSpool(t)}
	hit := 0
	for run := 0; hit < kills; run++ {
		if run > 20*kills {
			t.Fatalf("%d runs and only %d kills hit a live relay", run, hit)
		}
		before := pending()
		if before == 0 {
			break // all published: the clean run has nothing left, which is fine
		}
		// A small window makes a slow relay, so that kills land in the
		// middle of its runs too, not only after a fast one is done.
		runArgs := append(args[:len(args):len(args)], "--batch", strconv.Itoa(1+rng.IntN(64)), "--window", strconv.Itoa(1<<rng.IntN(9)))
		ps := make([]*proc, relays)
		for i := range ps {
			ps[i] = sp.start(t, runArgs...)
		}
		if rng.IntN(3) != 0 {
			waitForPublish(t, ps, pending, before)
		}
		for _, p := range ps {
			if p.killAfter(t, logDelay(rng, time.Millisecond, 150*time.Millisecond)) {
				hit++
			} else if r := p.result(); r.code != 0 {
				t.Fatalf("relay failed:\n%s", r)
			}
		}
	}
	t.Logf("%d kills of a live relay; %d rows left for the clean run", hit, pending())
	ps := make([]*proc, relays)
	clean := time.Now()
	for i := range ps {
		ps[i] = sp.start(t, args...)
	}
	for _, p := range ps {
		if r := p.wait(t); r.code != 0 {
			t.Fatalf("clean relay run:\n%s", r)
		}
	}
	t.Logf("the clean run took %v", time.Since(clean).Round(time.Millisecond))
	if n := pending(); n != 0 {
		t.Fatalf("%d rows unpublished after the clean run", n)
	}
}

// waitForPublish polls until fewer than before rows are pending, or
// every relay of ps has exited.
func waitForPublish(t *testing.T, ps []*proc, pending func() int, before int) {
	t.Helper()
	if !poll(cmdTimeout, time.Millisecond, func() bool {
		live := 0
		for _, p := range ps {
			select {
			case <-p.done:
			default:
				live++
			}
		}
		return live == 0 || pending() < before
	}) {
		t.Fatalf("relays published nothing within %v", cmdTimeout)
	}
}

// pendingRows counts q's outbox rows not yet published.
func pendingRows(t *testing.T, q string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(q, "ledger.db")+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM outbox WHERE published_at IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// received is one event as a receiver saw it.
type received struct {
	ID, Aggregate string
	OutboxID      int64
}

// checkReceived checks what a receiver saw of q's n outbox rows, in the
// order it saw them (repeats included): every row's event, under its id,
// at least once, and within each aggregate the first sight of each event
// in row order. It returns how many repeats there were.
func checkReceived(t *testing.T, q, queueID string, n int, got []received) int {
	t.Helper()
	return checkEvents(t, outboxEvents(t, openLedger(t, q), "outbox", queueID), n, got)
}

// outboxEvents maps the event id of each row of table (an outbox) to its
// aggregate.
func outboxEvents(t *testing.T, db *sql.DB, table, queueID string) map[string]string {
	t.Helper()
	rows, err := db.Query(`SELECT id, aggregate FROM ` + table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := map[string]string{}
	for rows.Next() {
		var id int64
		var agg string
		if err := rows.Scan(&id, &agg); err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf("%s-%020d", queueID, id)] = agg
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return want
}

// checkEvents is checkReceived against want, the outbox's event ids
// with their aggregates.
func checkEvents(t *testing.T, want map[string]string, n int, got []received) int {
	t.Helper()
	if len(want) != n {
		t.Fatalf("the outbox holds %d rows, want %d", len(want), n)
	}
	seen := map[string]bool{}
	last := map[string]int64{}
	repeats := 0
	for _, r := range got {
		agg, ok := want[r.ID]
		if !ok {
			t.Fatalf("received event %q, which is no row of the outbox", r.ID)
		}
		if r.Aggregate != agg || !strings.HasSuffix(r.ID, fmt.Sprintf("%020d", r.OutboxID)) {
			t.Fatalf("event %q carries aggregate %q and outbox id %d; its row's aggregate is %q", r.ID, r.Aggregate, r.OutboxID, agg)
		}
		if seen[r.ID] {
			repeats++
			continue
		}
		seen[r.ID] = true
		if r.OutboxID <= last[agg] {
			t.Fatalf("aggregate %s: event of row %d first seen after that of row %d", agg, r.OutboxID, last[agg])
		}
		last[agg] = r.OutboxID
	}
	if len(seen) != n {
		var missing []string
		for id := range want {
			if !seen[id] {
				missing = append(missing, id)
			}
		}
		sort.Strings(missing)
		t.Fatalf("received %d distinct events of %d; missing %d, first %v", len(seen), n, len(missing), missing[:min(3, len(missing))])
	}
	return repeats
}

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Queue identity: a ledger belongs to its queue. A
// missing, empty, mistyped or foreign ledger is refused with exit 2, one
// line, and nothing changed; reports never create a ledger; fsck --repair
// rebuilds a lost one, after which a redelivery is a duplicate again.

// consumedQueue makes a queue whose one message m.json was consumed into
// its own ledger, and returns it.
func consumedQueue(t *testing.T) string {
	t.Helper()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	putMessage(t, q, "m.json", orderMessage("m-1", "o-1", 1, "9.99"))
	requireStats(t, "first consume", mustRun(t, 0, "consume", q), consumeStats{Processed: 1})
	return q
}

// TestLostLedgerRefused: the ledger removed or emptied by hand. Consuming a
// redelivery is refused, changing nothing; fsck reports the loss without
// creating a ledger; fsck --repair rebuilds it from done/, and the
// redelivery is then a duplicate.
func TestLostLedgerRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
		state  string
	}{
		{"removed", func(t *testing.T, path string) { removeLedgerFiles(t, path) }, "does not exist"},
		{"emptied", func(t *testing.T, path string) {
			removeLedgerFiles(t, path)
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "is an empty file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := consumedQueue(t)
			path := filepath.Join(q, "ledger.db")
			tc.damage(t, path)
			redeliver(t, q, "m.json")

			before := treeSnapshot(t, q)
			r := run(t, "consume", q)
			requireRefusal(t, r, before, []string{q}, path, tc.state, "Try: spool fsck "+q+" --repair", "--new-ledger")
			if r.stdout != "" {
				t.Errorf("a refused consume printed on stdout: %q", r.stdout)
			}
			// Every other way of consuming or replaying is refused alike.
			for _, args := range [][]string{
				{"consume", q, "--watch"},
				{"replay", q, "--all"},
			} {
				requireRefusal(t, run(t, args...), before, []string{q}, path)
			}

			// fsck names the loss, exit 1, and creates nothing.
			rep := fsck(t, 1, q)
			requireFindings(t, "fsck of a lost ledger", rep, map[string]int{"ledger-missing": 1})
			if d := diffSnapshots(before, treeSnapshot(t, q)); len(d) > 0 {
				t.Errorf("fsck without --repair changed the queue: %q", d)
			}

			out := repairThenClean(t, q, nil)
			if !strings.Contains(strings.Join(out, "\n"), "repaired done/m.json: recorded as processed (msg_id m-1)") {
				t.Errorf("fsck --repair does not say it recorded done/m.json again:\n%s", strings.Join(out, "\n"))
			}
			if n := queryLedger(t, path, `SELECT COUNT(*) FROM processed WHERE msg_id = 'm-1' AND repaired_at IS NOT NULL`); n != 1 {
				t.Errorf("the rebuilt ledger holds %d repaired rows of m-1, want 1", n)
			}
			requireStats(t, "consume of the redelivery after the repair", mustRun(t, 0, "consume", q), consumeStats{Duplicates: 1})
			requireFindings(t, "fsck after consuming the redelivery", fsck(t, 0, q), nil)
		})
	}
}

// TestRelativeDBFromAnotherDirectory: a relative --db names another file
// from another working directory. That one is refused, not created; from
// the right directory the redelivery is a duplicate.
func TestRelativeDBFromAnotherDirectory(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	here, there := filepath.Join(base, "here"), filepath.Join(base, "there")
	for _, d := range []string{here, there} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	q := filepath.Join(base, "q")
	mustRunAt(t, 0, here, "init", q, "--db", "ledger.db")
	putMessage(t, q, "m.json", orderMessage("m-1", "o-1", 1, "9.99"))
	requireStats(t, "first consume", mustRunAt(t, 0, here, "consume", q, "--db", "ledger.db"), consumeStats{Processed: 1})
	redeliver(t, q, "m.json")

	roots := []string{q, here, there}
	before := treeSnapshot(t, roots...)
	r := runAt(t, there, "consume", q, "--db", "ledger.db")
	requireRefusal(t, r, before, roots, "ledger.db does not exist", "Try:")
	for _, report := range [][]string{{"status", q}, {"dups", q}, {"errors", q}} {
		requireRefusal(t, runAt(t, there, append(report, "--db", "ledger.db")...), before, roots, "ledger.db does not exist")
	}
	requireStats(t, "consume from the right directory", mustRunAt(t, 0, here, "consume", q, "--db", "ledger.db"), consumeStats{Duplicates: 1})
}

// TestTwoQueuesOneLedger: two queues pointed at one --db would mix their
// msg_ids. The second queue's consume, init and reports are refused and
// change nothing, in either queue or in the shared ledger.
func TestTwoQueuesOneLedger(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	shared := filepath.Join(base, "shared.db")
	q1, q2, q3 := filepath.Join(base, "q1"), filepath.Join(base, "q2"), filepath.Join(base, "q3")
	mustRun(t, 0, "init", q1, "--db", shared)
	putMessage(t, q1, "m.json", orderMessage("m-1", "o-1", 1, "9.99"))
	requireStats(t, "consume q1", mustRun(t, 0, "consume", q1, "--db", shared), consumeStats{Processed: 1})

	// q2 has a ledger of its own, and a message with q1's msg_id.
	mustRun(t, 0, "init", q2)
	putMessage(t, q2, "m.json", orderMessage("m-1", "o-2", 1, "1.00"))
	roots := []string{q1, q2, shared, filepath.Join(base, "q3")}
	before := treeSnapshot(t, roots...)
	const other = "ledger belongs to another queue"
	requireRefusal(t, run(t, "consume", q2, "--db", shared), before, roots, other, "Try:")
	requireRefusal(t, run(t, "consume", q2, "--db", shared, "--new-ledger"), before, roots, other)
	for _, report := range [][]string{
		{"status", q2}, {"dups", q2}, {"errors", q2}, {"order-check", q2}, {"replays", q2}, {"prune", q2, "--older-than", "1d"},
		{"replay", q2, "--all"},
	} {
		requireRefusal(t, run(t, append(report, "--db", shared)...), before, roots, other)
	}
	// fsck names it; --repair cannot fix it, and does not try.
	for _, args := range [][]string{nil, {"--repair"}} {
		rep := fsck(t, 1, q2, append(args, "--db", shared)...)
		requireFindings(t, fmt.Sprintf("fsck %q of q2 on q1's ledger", args), rep, map[string]int{"other-queue": 1})
		if d := diffSnapshots(before, treeSnapshot(t, roots...)); len(d) > 0 {
			t.Errorf("fsck %q of another queue's ledger changed: %q", args, d)
		}
	}

	// A new queue pointed at the shared ledger is refused at init.
	r := run(t, "init", q3, "--db", shared)
	if r.code != 2 || len(lines(r.stderr)) != 1 || !strings.Contains(r.stderr, other) {
		t.Errorf("init of a third queue on q1's ledger: want exit 2 and one line saying %q, got\n%s", other, r)
	}
	if d := diffSnapshots(before, treeSnapshot(t, q1, q2, shared)); len(d) > 0 {
		t.Errorf("init of a third queue on q1's ledger changed: %q", d)
	}

	// q2 on its own ledger: its m-1 is its own first delivery.
	requireStats(t, "consume q2 on its own ledger", mustRun(t, 0, "consume", q2), consumeStats{Processed: 1})
	requireFindings(t, "fsck of q1", fsck(t, 0, q1, "--db", shared), nil)
	requireFindings(t, "fsck of q2", fsck(t, 0, q2), nil)
}

// TestReportsNeverCreateALedger: every report with a mistyped --db, or with
// the queue's ledger gone, exits 2 with one line and creates no file.
func TestReportsNeverCreateALedger(t *testing.T) {
	t.Parallel()
	q := consumedQueue(t)
	base := filepath.Dir(q)
	typo := filepath.Join(base, "typo.db")
	reports := [][]string{
		{"dups", q}, {"dups", q, "--conflicts"}, {"order-check", q}, {"errors", q}, {"errors", q, "--json"},
		{"status", q}, {"replays", q}, {"prune", q, "--older-than", "30d"}, {"prune", q, "--older-than", "30d", "--dry-run"},
	}
	before := treeSnapshot(t, base)
	for _, args := range reports {
		requireRefusal(t, run(t, append(args, "--db", typo)...), before, []string{base}, typo, "does not exist")
	}
	// fsck reports a missing ledger as a finding, exit 1, creating nothing.
	requireFindings(t, "fsck with a mistyped --db", fsck(t, 1, q, "--db", typo), map[string]int{"ledger-missing": 1})
	if d := diffSnapshots(before, treeSnapshot(t, base)); len(d) > 0 {
		t.Errorf("fsck with a mistyped --db changed: %q", d)
	}

	// --db naming an SQLite database that is not a ledger (the business
	// database, say): refused, and no table is added to it.
	biz := filepath.Join(base, "business.db")
	execLedgerCreate(t, biz, `CREATE TABLE orders (id TEXT PRIMARY KEY)`)
	before = treeSnapshot(t, base)
	for _, args := range reports {
		requireRefusal(t, run(t, append(args, "--db", biz)...), before, []string{base}, biz, "holds no spool ledger")
	}
	// So is a consume of this queue, which has history, into it, asking
	// first whether --db is right.
	requireRefusal(t, run(t, "consume", q, "--db", biz), before, []string{base}, biz, "holds no spool ledger (is --db right?)", "Try: fix --db; only if it is right, spool fsck "+q+" --db "+biz+" --repair")

	// Without --db, with the queue's own ledger removed.
	path := filepath.Join(q, "ledger.db")
	removeLedgerFiles(t, path)
	before = treeSnapshot(t, base)
	for _, args := range reports {
		requireRefusal(t, run(t, args...), before, []string{base}, path, "does not exist")
	}
}

// TestNewLedgerOnPurpose: --new-ledger accepts an empty ledger for a queue
// with history, as the operator asked; the queue and the new ledger are
// then bound, and a redelivery of an old message is processed again, as
// the flag's help warns. It accepts only an empty ledger: never another
// queue's.
func TestNewLedgerOnPurpose(t *testing.T) {
	t.Parallel()
	q := consumedQueue(t)
	id := readID(t, q)
	path := filepath.Join(q, "ledger.db")
	removeLedgerFiles(t, path)
	redeliver(t, q, "m.json")
	requireStats(t, "consume --new-ledger", mustRun(t, 0, "consume", q, "--new-ledger"), consumeStats{Processed: 1})
	if got := readID(t, q); got != id {
		t.Errorf("queue.id changed from %q to %q", id, got)
	}
	if n := queryLedger(t, path, `SELECT COUNT(*) FROM meta WHERE name = 'queue_id' AND value = ?`, id); n != 1 {
		t.Errorf("the new ledger is not bound to queue %s", id)
	}
	// Bound now: the next run needs no flag, and a redelivery is a
	// duplicate again.
	redeliver(t, q, "m.json")
	requireStats(t, "consume after --new-ledger", mustRun(t, 0, "consume", q), consumeStats{Duplicates: 1})

	// An emptied ledger, on purpose through init.
	removeLedgerFiles(t, path)
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	before := treeSnapshot(t, q)
	requireRefusal(t, run(t, "init", q), before, []string{q}, "is an empty file")
	mustRun(t, 0, "init", q, "--new-ledger")
	redeliver(t, q, "m.json")
	requireStats(t, "consume after init --new-ledger", mustRun(t, 0, "consume", q), consumeStats{Processed: 1})

	// Another queue's ledger is refused even with --new-ledger.
	q2 := filepath.Join(t.TempDir(), "q2")
	mustRun(t, 0, "init", q2)
	putMessage(t, q2, "m.json", orderMessage("m-1", "o-1", 1, "9.99"))
	roots := []string{q, q2}
	before = treeSnapshot(t, roots...)
	requireRefusal(t, run(t, "consume", q2, "--db", path, "--new-ledger"), before, roots, "ledger belongs to another queue")
}

// TestLegacyQueueAdopted: a queue made before identities has no queue.id,
// and its ledger records messages but no queue. Reports read it as it is
// and bind nothing; fsck calls it unbound (informational, exit 0); the
// first consume adopts it, writing queue.id and the ledger's row, and old
// messages stay duplicates.
func TestLegacyQueueAdopted(t *testing.T) {
	t.Parallel()
	q := consumedQueue(t)
	path := filepath.Join(q, "ledger.db")
	if err := os.Remove(filepath.Join(q, "queue.id")); err != nil {
		t.Fatal(err)
	}
	execLedger(t, path, `DELETE FROM meta WHERE name = 'queue_id'`)

	before := treeSnapshot(t, q)
	for _, args := range [][]string{{"status", q}, {"dups", q}, {"errors", q}, {"replays", q}} {
		mustRun(t, 0, args...)
	}
	requireFindings(t, "fsck of a legacy queue", fsck(t, 0, q), map[string]int{"unbound": 1})
	if d := diffSnapshots(before, treeSnapshot(t, q)); len(d) > 0 {
		t.Errorf("reports and fsck of a legacy queue changed it: %q", d)
	}

	redeliver(t, q, "m.json")
	putMessage(t, q, "n.json", orderMessage("n-1", "o-1", 2, "1.00"))
	requireStats(t, "consume of a legacy queue", mustRun(t, 0, "consume", q), consumeStats{Processed: 1, Duplicates: 1})
	id := readID(t, q)
	if len(id) != 32 {
		t.Fatalf("consume did not give the legacy queue an identity: queue.id holds %q", id)
	}
	if n := queryLedger(t, path, `SELECT COUNT(*) FROM meta WHERE name = 'queue_id' AND value = ?`, id); n != 1 {
		t.Errorf("consume did not bind the legacy ledger to queue %s", id)
	}
	requireFindings(t, "fsck after adoption", fsck(t, 0, q), nil)

	// A legacy ledger that holds no record is not adopted by a queue with
	// history: it is not the ledger that recorded it.
	fresh := filepath.Join(t.TempDir(), "fresh")
	mustRun(t, 0, "init", fresh)
	legacyEmpty := filepath.Join(fresh, "ledger.db")
	execLedger(t, legacyEmpty, `DELETE FROM meta WHERE name = 'queue_id'`)
	redeliver(t, q, "m.json")
	roots := []string{q, fresh}
	before = treeSnapshot(t, roots...)
	requireRefusal(t, run(t, "consume", q, "--db", legacyEmpty), before, roots, "ledger has no record of this queue's messages", "Try: spool fsck")
}

// TestPostgresQueueSchemas: on PostgreSQL each queue has a schema of its
// own (?search_path=NAME). Two queues in two schemas both work, with the
// same msg_ids; a third pointed at the first's schema is refused, exit 2,
// changing nothing; a report on an empty schema creates no table.
func TestPostgresQueueSchemas(t *testing.T) {
	t.Parallel()
	dsn, admin := postgresServer(t)
	s1, s2, empty := postgresSchema(t, admin), postgresSchema(t, admin), postgresSchema(t, admin)
	db1, db2 := withSearchPath(t, dsn, s1), withSearchPath(t, dsn, s2)
	base := t.TempDir()
	var qs []string
	for i, db := range []string{db1, db2} {
		q := filepath.Join(base, fmt.Sprintf("q%d", i+1))
		qs = append(qs, q)
		mustRun(t, 0, "init", q, "--db", db)
		putMessage(t, q, "m.json", orderMessage("m-1", "o-1", 1, "9.99"))
		requireStats(t, fmt.Sprintf("consume q%d", i+1), mustRun(t, 0, "consume", q, "--db", db), consumeStats{Processed: 1})
		redeliver(t, q, "m.json")
		requireStats(t, fmt.Sprintf("redelivery in q%d", i+1), mustRun(t, 0, "consume", q, "--db", db), consumeStats{Duplicates: 1})
		requireFindings(t, fmt.Sprintf("fsck q%d", i+1), fsck(t, 0, q, "--db", db), nil)
	}
	rows := func(schema string) string {
		var p, d int
		if err := admin.QueryRow(`SELECT (SELECT COUNT(*) FROM `+schema+`.processed), (SELECT COUNT(*) FROM `+schema+`.deliveries)`).Scan(&p, &d); err != nil {
			t.Fatal(err)
		}
		var id string
		if err := admin.QueryRow(`SELECT value FROM ` + schema + `.meta WHERE name = 'queue_id'`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("processed=%d deliveries=%d queue=%s", p, d, id)
	}
	for i, s := range []string{s1, s2} {
		if got, want := rows(s), fmt.Sprintf("processed=1 deliveries=1 queue=%s", readID(t, qs[i])); got != want {
			t.Errorf("schema of q%d: %s, want %s", i+1, got, want)
		}
	}

	// A third queue on q1's schema.
	q3 := filepath.Join(base, "q3")
	mustRun(t, 0, "init", q3)
	putMessage(t, q3, "m.json", orderMessage("m-1", "o-3", 1, "3.00"))
	roots := append(qs, q3)
	before, rows1 := treeSnapshot(t, roots...), rows(s1)
	for _, args := range [][]string{{"consume", q3}, {"consume", q3, "--new-ledger"}, {"status", q3}, {"dups", q3}, {"replay", q3, "--all"}} {
		requireRefusal(t, run(t, append(args, "--db", db1)...), before, roots, "ledger belongs to another queue")
	}
	r := run(t, "init", filepath.Join(base, "q4"), "--db", db1)
	if r.code != 2 || !strings.Contains(r.stderr, "ledger belongs to another queue") {
		t.Errorf("init of a fourth queue on q1's schema: want exit 2, got\n%s", r)
	}
	if got := rows(s1); got != rows1 {
		t.Errorf("refusals changed q1's schema: %s, was %s", got, rows1)
	}

	// A report on a schema without a ledger creates none.
	dbEmpty := withSearchPath(t, dsn, empty)
	for _, args := range [][]string{{"status", q3}, {"dups", q3}, {"errors", q3}, {"replays", q3}} {
		r := run(t, append(args, "--db", dbEmpty)...)
		if r.code != 2 || len(lines(r.stderr)) != 1 {
			t.Errorf("report on an empty schema: want exit 2 and one line, got\n%s", r)
		}
	}
	tables := func() int {
		var n int
		if err := admin.QueryRow(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = $1`, empty).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := tables(); n != 0 {
		t.Errorf("reports on an empty schema created %d tables in it", n)
	}

	// q1, which has history, pointed at an empty schema: the PostgreSQL
	// form of a removed ledger.db, or a wrong --db. Refused, asking first
	// whether --db is right, and no table is created.
	redeliver(t, qs[0], "m.json")
	before = treeSnapshot(t, qs[0])
	requireRefusal(t, run(t, "consume", qs[0], "--db", dbEmpty), before, qs[:1], "(is --db right?)", "spool fsck "+qs[0]+" --db '"+dbEmpty+"' --repair")
	if n := tables(); n != 0 {
		t.Errorf("a refused consume created %d tables in the empty schema", n)
	}
	// fsck --repair rebuilds the ledger there, and the redelivery is a
	// duplicate in it.
	repairThenClean(t, qs[0], nil, "--db", dbEmpty)
	requireStats(t, "consume into the rebuilt schema", mustRun(t, 0, "consume", qs[0], "--db", dbEmpty), consumeStats{Duplicates: 1})
}

// TestCorruptQueueID: a queue.id that holds no identity (edited, or a
// stray file) is a refusal, exit 2 with one line saying what to run, for
// consume, reports and fsck alike, changing nothing; after the operator
// removes it, fsck --repair writes the ledger's identity back.
func TestCorruptQueueID(t *testing.T) {
	t.Parallel()
	q := consumedQueue(t)
	id := readID(t, q)
	if err := os.WriteFile(filepath.Join(q, "queue.id"), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := treeSnapshot(t, q)
	for _, args := range [][]string{{"consume", q}, {"status", q}, {"replay", q, "--all"}, {"fsck", q}, {"fsck", q, "--repair"}} {
		requireRefusal(t, run(t, args...), before, []string{q}, "queue.id", "not a queue identity", "Try: ")
	}
	if err := os.Remove(filepath.Join(q, "queue.id")); err != nil {
		t.Fatal(err)
	}
	repairThenClean(t, q, nil)
	if got := readID(t, q); got != id {
		t.Errorf("queue.id holds %q after the repair, want %q", got, id)
	}
}

// TestLedgerRestoredFromBeforeFirstConsume: the ledger restored from a
// copy taken right after spool init. It is the queue's own, bound to it,
// and holds no record at all while done/ holds messages: as good as an
// empty one. Consuming is refused; fsck --repair rebuilds it.
func TestLedgerRestoredFromBeforeFirstConsume(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	path := filepath.Join(q, "ledger.db")
	mustRun(t, 0, "init", q)
	fresh, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	putMessage(t, q, "m.json", orderMessage("m-1", "o-1", 1, "9.99"))
	requireStats(t, "first consume", mustRun(t, 0, "consume", q), consumeStats{Processed: 1})
	removeLedgerFiles(t, path)
	if err := os.WriteFile(path, fresh, 0o644); err != nil {
		t.Fatal(err)
	}
	redeliver(t, q, "m.json")
	before := treeSnapshot(t, q)
	requireRefusal(t, run(t, "consume", q), before, []string{q}, "ledger has no record of this queue's messages", "Try: spool fsck "+q+" --repair")
	requireFindings(t, "fsck", fsck(t, 1, q), map[string]int{"done-unrecorded": 1})
	repairThenClean(t, q, nil)
	requireStats(t, "consume after the repair", mustRun(t, 0, "consume", q), consumeStats{Duplicates: 1})
}

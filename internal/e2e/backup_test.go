package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// spool backup: a copy taken while a consumer records is one consistent
// snapshot; the refusals; and a restore of a copy that spool fsck
// --repair completes.

// backupOut is spool backup --json.
type backupOut struct {
	Ledger     string `json:"ledger"`
	File       string `json:"file"`
	Bytes      int64  `json:"bytes"`
	QueueID    string `json:"queue_id"`
	Processed  int64  `json:"processed"`
	Deliveries int64  `json:"deliveries"`
	Replays    int64  `json:"replays"`
	Integrity  string `json:"integrity"`
}

func backupJSON(t *testing.T, args ...string) backupOut {
	t.Helper()
	r := mustRun(t, 0, append([]string{"backup"}, append(args, "--json")...)...)
	var out backupOut
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("spool backup --json: %v\n%s", err, r)
	}
	return out
}

// checkCopy opens a backup with SQLite itself: its integrity check passes,
// it is bound to queue qid, and it holds want processed rows (-1: any); it
// returns how many it holds.
func checkCopy(t *testing.T, path, qid string, want int) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var check string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("%s: integrity_check = %q, %v", path, check, err)
	}
	var id string
	if err := db.QueryRow(`SELECT value FROM meta WHERE name = 'queue_id'`).Scan(&id); err != nil || id != qid {
		t.Errorf("%s: bound to queue %q (%v), want %q", path, id, err, qid)
	}
	n := count(t, db, `SELECT COUNT(*) FROM processed`)
	if want >= 0 && n != want {
		t.Errorf("%s: %d processed rows, want %d", path, n, want)
	}
	return n
}

// TestBackupDuringConsume: backups taken while consume --watch records
// messages that keep arriving. Each is whole and sound (integrity_check),
// bound to the queue, opens as its ledger (spool status --db COPY), and
// holds as many processed rows as the live ledger held at some instant
// during the backup (between the counts read just before and just after),
// as many as --json reports.
func TestBackupDuringConsume(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	qid := readID(t, q)
	live := filepath.Join(q, "ledger.db")
	p := start(t, "consume", q, "--watch")
	backups := t.TempDir()
	// A producer keeps messages coming while the backups are taken.
	const total = 1500
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; i < total; i += 10 {
			putMessagesQuiet(q, i, 10)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	inside := 0 // backups whose snapshot fell strictly inside the consumer's work
	for i := 0; ; i++ {
		before := queryLedger(t, live, `SELECT COUNT(*) FROM processed`)
		file := filepath.Join(backups, fmt.Sprintf("ledger-%d.db", i))
		out := backupJSON(t, q, "--to", file)
		after := queryLedger(t, live, `SELECT COUNT(*) FROM processed`)
		select {
		case <-p.done:
			t.Fatalf("the consumer exited during the backups\n%s", p.result())
		default:
		}
		n := checkCopy(t, file, qid, int(out.Processed))
		if n < before || n > after {
			t.Errorf("backup %d holds %d processed rows, but the live ledger held %d before it and %d after", i, n, before, after)
		}
		if n < after {
			inside++
		}
		t.Logf("backup %d: %d processed rows (live: %d before, %d after)", i, n, before, after)
		if out.Integrity != "ok" || out.QueueID != qid || out.File != file || out.Bytes <= 0 {
			t.Errorf("backup %d: --json %+v", i, out)
		}
		if fi, err := os.Stat(file); err != nil || fi.Size() != out.Bytes || fi.Mode().Perm() != 0o600 {
			t.Errorf("backup %d: %v, %v; want %d bytes, mode 0600", i, fi, err, out.Bytes)
		}
		mustRun(t, 0, "status", q, "--db", file)
		// Three snapshots inside the consumer's work are enough; a loaded
		// machine, which stretches the production, takes no more.
		if inside >= 3 {
			break
		}
		select {
		case <-produced:
		default:
			continue
		}
		break
	}
	<-produced
	// The consumer records the last messages; then it is stopped.
	waitFor(t, cmdTimeout, fmt.Sprintf("the consumer to record the %d messages", total), func() bool {
		return queryLedger(t, live, `SELECT COUNT(*) FROM processed`) >= total
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := p.wait(t); r.code != 0 {
		t.Fatalf("consume: %s", r)
	}
	if inside == 0 {
		t.Errorf("no backup's snapshot fell inside the consumer's work: the test proved nothing")
	}
	final := filepath.Join(backups, "final.db")
	out := backupJSON(t, q, "--to", final)
	checkCopy(t, final, qid, total)
	if out.Processed != total {
		t.Errorf("the last backup reports %d processed rows, want %d", out.Processed, total)
	}
	// No temp file is left beside the copies.
	ents, err := os.ReadDir(backups)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left beside the backups: %s", e.Name())
		}
	}
}

// TestBackupRefusals: each refusal is exit 2 with one line saying why,
// and writes nothing: an existing FILE (without --force), the live
// ledger or its -wal (even with --force), no --to, a PostgreSQL or MariaDB
// ledger (naming pg_dump, mariadb-dump). A temp file left by a killed
// backup is removed by the next one, which says so.
func TestBackupRefusals(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	putMessages(t, q, 0, 10, 0)
	mustRun(t, 0, "consume", q)
	dir := t.TempDir()
	existing := filepath.Join(dir, "old.db")
	if err := os.WriteFile(existing, []byte("an older backup"), 0o644); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(q, "ledger.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", q, "--to", existing}, "exists: give a new name"},
		{[]string{"backup", q, "--to", live}, "is the live ledger"},
		{[]string{"backup", q, "--to", live, "--force"}, "is the live ledger"},
		{[]string{"backup", q, "--to", live + "-wal", "--force"}, "is the live ledger's wal file"},
		{[]string{"backup", q}, "missing --to FILE"},
	} {
		before := treeSnapshot(t, q, dir)
		r := mustRun(t, 2, c.args...)
		requireRefusal(t, r, before, []string{q, dir}, c.want)
		if !strings.HasPrefix(r.stderr, "spool: backup: ") {
			t.Errorf("%q: stderr %q", c.args, r.stderr)
		}
	}
	if b, err := os.ReadFile(existing); err != nil || string(b) != "an older backup" {
		t.Errorf("the existing FILE changed: %q, %v", b, err)
	}
	out := backupJSON(t, q, "--to", existing, "--force")
	checkCopy(t, existing, readID(t, q), 10)
	if out.Processed != 10 {
		t.Errorf("--force: %+v", out)
	}

	// The refusals wrote no audit row (they changed nothing, the ledger
	// included); the backup that ran wrote one, closed ok.
	requireAudit(t, live, "backup", []auditRow{{Outcome: "ok",
		Counts: map[string]int64{"processed": 10, "deliveries": 0, "replays": 0, "bytes": out.Bytes}}})

	// A temp file a killed backup left (its lock free) is removed.
	stale := filepath.Join(dir, ".new.db.tmp-0123456789abcdef")
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, 0, "backup", q, "--to", filepath.Join(dir, "new.db"))
	if !strings.Contains(r.stderr, "removed .new.db.tmp-0123456789abcdef") {
		t.Errorf("the stale temp's removal is not told: %s", r)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale temp file is still there: %v", err)
	}

	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dsn, admin := postgresServer(t)
		db := withSearchPath(t, dsn, postgresSchema(t, admin))
		refuseServerBackup(t, db, "pg_dump")
	})
	t.Run("mysql", func(t *testing.T) {
		t.Parallel()
		db, _ := mysqlDatabase(t)
		refuseServerBackup(t, db, "mariadb-dump")
	})
}

// refuseServerBackup checks that spool backup refuses a queue whose
// ledger is on a server at db, naming tool.
func refuseServerBackup(t *testing.T, db, tool string) {
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q, "--db", db)
	file := filepath.Join(t.TempDir(), "copy.db")
	r := mustRun(t, 2, "backup", q, "--db", db, "--to", file)
	if len(lines(r.stderr)) != 1 || !strings.Contains(r.stderr, "back it up with "+tool) {
		t.Errorf("want one line naming %s: %s", tool, r)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("%s was written: %v", file, err)
	}
}

// TestBackupRestore is the restore runbook of docs/OPERATIONS.md: a
// backup, then more messages (processed, a duplicate, a dead letter);
// the ledger restored from the backup; spool fsck names exactly what came
// after, --repair records it, and the ledger agrees with the directories
// again: fsck is clean and a redelivery of a message processed after the
// backup is a duplicate.
func TestBackupRestore(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	live := filepath.Join(q, "ledger.db")
	mustRun(t, 0, "init", q)
	const half = 60
	putMessages(t, q, 0, half, 0)
	mustRun(t, 0, "consume", q)
	file := filepath.Join(t.TempDir(), "ledger.db")
	backupJSON(t, q, "--to", file)

	putMessages(t, q, half, half, 0)
	putMessage(t, q, "again.json", orderMessage(fmt.Sprintf("m-%05d", half), "o", 1, "1.00"))
	putMessage(t, q, "poison.json", "not json")
	requireStats(t, "after the backup", mustRun(t, 0, "consume", q), consumeStats{Processed: half, Duplicates: 1, DeadLetters: 1})

	// The restore: consumers stopped, the ledger's files replaced by the copy.
	removeLedgerFiles(t, live)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(live, data, 0o644); err != nil {
		t.Fatal(err)
	}
	requireFindings(t, "fsck of the restored ledger", fsck(t, 1, q),
		map[string]int{"done-unrecorded": half + 1, "error-unrecorded": 1})
	repairThenClean(t, q, nil)
	if n := queryLedger(t, live, `SELECT COUNT(*) FROM processed`); n != 2*half {
		t.Errorf("processed holds %d rows after the repair, want %d", n, 2*half)
	}
	redeliver(t, q, fmt.Sprintf("m%05d.json", 2*half-1))
	redeliver(t, q, "m00000.json")
	requireStats(t, "redeliveries after the restore", mustRun(t, 0, "consume", q), consumeStats{Duplicates: 2})
	requireFindings(t, "fsck at the end", fsck(t, 0, q), nil)
}

// putMessagesQuiet is putMessages for a goroutine other than the test's:
// it cannot fail the test, and a message it could not put is simply
// missing, which the test's count then reports.
func putMessagesQuiet(q string, first, n int) {
	for i := first; i < first+n; i++ {
		name := fmt.Sprintf("m%05d.json", i)
		tmp := filepath.Join(q, inbox, "."+name+".tmp")
		body := orderMessage(fmt.Sprintf("m-%05d", i), fmt.Sprintf("o-%05d", i), 1, "1.00")
		if os.WriteFile(tmp, []byte(body), 0o644) == nil {
			_ = os.Rename(tmp, filepath.Join(q, inbox, name))
		}
	}
}

// TestBackupCrash: spool backup SIGKILLed at instants drawn uniformly over
// an uninterrupted backup's time. After each kill FILE is either absent or
// a whole, sound copy bound to the queue, never a part; what the kill left
// beside it is at most the temp file, which the next backup to FILE
// removes, saying so, before it writes a whole copy. The quick run backs
// up a ledger of 400 messages through 5 kills; SPOOL_TEST_LONG=1 5000
// through 12.
func TestBackupCrash(t *testing.T) {
	t.Parallel()
	rng := newRand(t)
	sp := spoolAt{bin: plainSpool(t)}
	q := filepath.Join(t.TempDir(), "q")
	sp.mustRun(t, 0, "init", q)
	n := testenv.Pick(5000, 400)
	putMessages(t, q, 0, n, 0)
	sp.mustRun(t, 0, "consume", q)
	qid := readID(t, q)
	dir := t.TempDir()
	t0 := time.Now()
	sp.mustRun(t, 0, "backup", q, "--to", filepath.Join(dir, "first.db"))
	span := time.Since(t0)
	kills, whole := 0, 0
	for round := range testenv.Pick(12, 5) {
		file := filepath.Join(dir, fmt.Sprintf("b%d.db", round))
		delay := time.Duration(rng.Int64N(int64(span) + 1))
		p := sp.start(t, "backup", q, "--to", file)
		if p.killAfter(t, delay) {
			kills++
		} else if r := p.result(); r.code != 0 {
			t.Fatalf("round %d: backup exited by itself with a failure\n%s", round, r)
		}
		if _, err := os.Stat(file); err == nil {
			whole++
			checkCopy(t, file, qid, n)
			continue
		}
		r := sp.mustRun(t, 0, "backup", q, "--to", file)
		checkCopy(t, file, qid, n)
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "."+filepath.Base(file)) {
				t.Errorf("round %d: %s is left after the next backup\n%s", round, e.Name(), r)
			}
		}
	}
	t.Logf("an uninterrupted backup takes %v; %d kills hit a live backup, %d rounds left a whole FILE", span, kills, whole)
	if kills == 0 {
		t.Errorf("no kill hit a live backup: the test proved nothing")
	}
}

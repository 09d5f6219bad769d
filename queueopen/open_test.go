package queueopen_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/postgres"
	_ "github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/replay"
)

// newQueue makes an empty queue directory.
func newQueue(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "q")
	if err := queue.Init(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// withID gives the queue at dir its identity, as spool init does.
func withID(t *testing.T, dir string) {
	t.Helper()
	d, err := queue.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.EnsureID(); err != nil {
		t.Fatal(err)
	}
}

// put writes a message file into a stage of the queue at dir, as a
// consumer or producer would leave it there.
func put(t *testing.T, dir string, stage queue.Stage, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, string(stage), name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// open is queueopen.Open that fails the test on error and closes at the
// end.
func open(t *testing.T, dir string, o queueopen.Options) *queueopen.Queue {
	t.Helper()
	q, err := queueopen.Open(t.Context(), dir, o)
	if err != nil {
		t.Fatalf("Open(%s, %+v): %v", dir, o, err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return q
}

// refused checks that err is a *LedgerError with found and wrapping want.
func refused(t *testing.T, err error, found queueopen.Found, want error) *queueopen.LedgerError {
	t.Helper()
	var le *queueopen.LedgerError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v (%T), want a *queueopen.LedgerError", err, err)
	}
	if le.Found != found {
		t.Errorf("Found = %v, want %v (%v)", le.Found, found, err)
	}
	if !errors.Is(err, want) {
		t.Errorf("err = %v, want one wrapping %v", err, want)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}
	return le
}

// TestOpenBindsANewQueue: a new queue and its new ledger are bound by the
// first writer, and a reader then sees the same identity.
func TestOpenBindsANewQueue(t *testing.T) {
	dir := newQueue(t)
	q := open(t, dir, queueopen.Options{Use: queueopen.Consume})
	if want := filepath.Join(dir, queueopen.DefaultLedger); q.Name != want {
		t.Errorf("Name = %q, want %q", q.Name, want)
	}
	qid, err := q.Dir.ID()
	if err != nil || qid == "" {
		t.Fatalf("queue.id after Open: %q, %v", qid, err)
	}
	lid, err := q.Ledger.QueueID(t.Context())
	if err != nil || lid != qid {
		t.Fatalf("ledger's queue = %q (%v), want the queue's %q", lid, err, qid)
	}
	r := open(t, dir, queueopen.Options{})
	if lid, _ := r.Ledger.QueueID(t.Context()); lid != qid {
		t.Errorf("a reader sees queue %q, want %q", lid, qid)
	}
}

// TestReaderNeedsALedger: a reader refuses a missing or empty SQLite file
// and creates nothing.
func TestReaderNeedsALedger(t *testing.T) {
	dir := newQueue(t)
	path := filepath.Join(dir, queueopen.DefaultLedger)
	_, err := queueopen.Open(t.Context(), dir, queueopen.Options{})
	le := refused(t, err, queueopen.NoFile, ledger.ErrNoLedger)
	if le.Ledger != path || le.Queue != dir {
		t.Errorf("LedgerError names %q of %q, want %q of %q", le.Ledger, le.Queue, path, dir)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused reader left %s: %v", path, err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = queueopen.Open(t.Context(), dir, queueopen.Options{DB: "sqlite:" + path})
	le = refused(t, err, queueopen.EmptyFile, ledger.ErrNoLedger)
	if le.Ledger != path {
		t.Errorf("sqlite:PATH is named %q, want the path %q", le.Ledger, path)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("the empty file after a refusal: %v, %v", fi, err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), queueopen.DefaultLedger+"-") {
			t.Errorf("a refused reader left %s", e.Name())
		}
	}
}

// TestWriterOfAQueueWithHistory: a queue whose done/ holds messages needs
// the ledger that recorded them; NewLedger starts one on purpose.
func TestWriterOfAQueueWithHistory(t *testing.T) {
	dir := newQueue(t)
	put(t, dir, queue.Done, "m1.json", `{"msg_id":"m1","order_no":"A","seq":1,"amount":"1"}`)
	for _, use := range []queueopen.Use{queueopen.Write, queueopen.Consume} {
		_, err := queueopen.Open(t.Context(), dir, queueopen.Options{Use: use})
		refused(t, err, queueopen.NoFile, ledger.ErrNewLedger)
	}
	if _, err := os.Stat(filepath.Join(dir, queueopen.DefaultLedger)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused writer created the ledger: %v", err)
	}
	q := open(t, dir, queueopen.Options{Use: queueopen.Write, NewLedger: true})
	if id, err := q.Ledger.QueueID(t.Context()); err != nil || id == "" {
		t.Errorf("NewLedger left the ledger unbound: %q, %v", id, err)
	}
	// Once started on purpose, it is accepted without NewLedger.
	open(t, dir, queueopen.Options{Use: queueopen.Consume})
}

// TestAnotherDatabaseIsLeftAlone: an SQLite database that is not a
// ledger is refused, by a reader and by a writer of a queue with history,
// and is not switched to WAL mode or given tables.
func TestAnotherDatabaseIsLeftAlone(t *testing.T) {
	dir := newQueue(t)
	app := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", app)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE customers (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before := header(t, app)
	_, err = queueopen.Open(t.Context(), dir, queueopen.Options{DB: app})
	refused(t, err, queueopen.NotLedger, ledger.ErrNoLedger)
	put(t, dir, queue.Error, "bad.json", `not json`)
	_, err = queueopen.Open(t.Context(), dir, queueopen.Options{DB: app, Use: queueopen.Consume})
	refused(t, err, queueopen.NotLedger, ledger.ErrNewLedger)
	if after := header(t, app); after != before {
		t.Errorf("the database's header changed from %x to %x (journal mode switched?)", before, after)
	}
	if _, err := os.Stat(app + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refusal left %s-wal: %v", app, err)
	}
}

// header returns the bytes of an SQLite file's header that say its
// journal mode (18 and 19: 2 for WAL) and its schema cookie (40-43).
func header(t *testing.T, path string) [6]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var h [100]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		t.Fatal(err)
	}
	return [6]byte{h[18], h[19], h[40], h[41], h[42], h[43]}
}

// TestAnotherQueuesLedger: a ledger bound to one queue is refused for
// another, for reading and writing, with ledger.ErrOtherQueue.
func TestAnotherQueuesLedger(t *testing.T) {
	first, second := newQueue(t), newQueue(t)
	withID(t, second)
	db := filepath.Join(t.TempDir(), "shared.db")
	open(t, first, queueopen.Options{DB: db, Use: queueopen.Write})
	for _, use := range []queueopen.Use{queueopen.Read, queueopen.Write, queueopen.Consume} {
		_, err := queueopen.Open(t.Context(), second, queueopen.Options{DB: db, Use: use})
		le := refused(t, err, queueopen.BindRefused, ledger.ErrOtherQueue)
		if le.Ledger != db {
			t.Errorf("Ledger = %q, want %q", le.Ledger, db)
		}
	}
	lid, _ := open(t, first, queueopen.Options{DB: db}).Ledger.QueueID(t.Context())
	fid, _ := open(t, first, queueopen.Options{DB: db}).Dir.ID()
	if lid != fid {
		t.Errorf("the shared ledger now names queue %q, want the first's %q", lid, fid)
	}
}

// TestNotAQueue: a directory that does not exist is not a queue.
func TestNotAQueue(t *testing.T) {
	_, err := queueopen.Open(t.Context(), filepath.Join(t.TempDir(), "missing"), queueopen.Options{Use: queueopen.Consume})
	if !errors.Is(err, queue.ErrNotQueue) {
		t.Fatalf("err = %v, want queue.ErrNotQueue", err)
	}
}

// TestKeywordDSN: a libpq keyword/value string is refused before it can
// be taken for a file name, and nothing is created.
func TestKeywordDSN(t *testing.T) {
	dir := newQueue(t)
	before, _ := os.ReadDir(dir)
	const dsn = "host=127.0.0.1 dbname=test"
	if _, err := queueopen.Open(t.Context(), dir, queueopen.Options{DB: dsn, Use: queueopen.Write}); !errors.Is(err, queueopen.ErrKeywordDSN) {
		t.Errorf("Open: %v, want ErrKeywordDSN", err)
	}
	if _, err := queueopen.OpenLedger(t.Context(), dir, queueopen.Options{DB: dsn, Use: queueopen.Write}); !errors.Is(err, queueopen.ErrKeywordDSN) {
		t.Errorf("OpenLedger: %v, want ErrKeywordDSN", err)
	}
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf("a refused keyword DSN left files: %d entries, were %d", len(after), len(before))
	}
	if _, err := os.Stat(dsn); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%q was created: %v", dsn, err)
	}
}

// TestOpenLedgerUnbound: OpenLedger opens without binding, for fsck: a
// writer creates the ledger and leaves it unbound; a reader needs one.
func TestOpenLedgerUnbound(t *testing.T) {
	dir := newQueue(t)
	if l, err := queueopen.OpenLedger(t.Context(), dir, queueopen.Options{}); err == nil {
		_ = l.Close()
		t.Fatal("a reader opened a ledger that does not exist")
	}
	if _, err := os.Stat(filepath.Join(dir, queueopen.DefaultLedger)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a reader created the ledger: %v", err)
	}
	l, err := queueopen.OpenLedger(t.Context(), dir, queueopen.Options{Use: queueopen.Write})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if id, err := l.QueueID(t.Context()); err != nil || id != "" {
		t.Errorf("OpenLedger bound the ledger: %q, %v", id, err)
	}
}

// TestConsumeStartsTheQueue: Open for Consume finishes a replay a killed
// run left unfinished, removes stale temp files, and reports both; Write
// does neither.
func TestConsumeStartsTheQueue(t *testing.T) {
	dir := newQueue(t)
	q := open(t, dir, queueopen.Options{Use: queueopen.Write})
	put(t, dir, queue.Error, "dead.json", `not json`)
	fi, err := os.Stat(filepath.Join(dir, "error", "dead.json"))
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	// A replay killed right after it committed its intent (step 1).
	if _, err := q.Ledger.Tasks().Start(t.Context(), ledger.TaskStart{
		Task:  ledger.TaskRecord{Kind: "replay", Files: 1, By: "alice", Via: ledger.AuditCLI},
		Files: []ledger.TaskFile{{Idx: 0, File: "dead.json", Ino: ino}},
		Move:  ledger.TaskMove{Kind: "replay", By: "alice", Note: "fixed", At: time.Now(), Replay: []ledger.ReplayItem{{Idx: 0, File: "dead.json", Ino: ino}}},
		Audit: ledger.AuditEntry{Actor: "alice", Via: ledger.AuditCLI, Action: "replay"},
	}); err != nil {
		t.Fatal(err)
	}
	temp := filepath.Join(dir, "inbox", queue.TempPrefix+"killed")
	if err := os.WriteFile(temp, []byte("half a message"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * queue.StaleTempAge)
	if err := os.Chtimes(temp, old, old); err != nil {
		t.Fatal(err)
	}

	open(t, dir, queueopen.Options{Use: queueopen.Write})
	if _, err := os.Stat(filepath.Join(dir, "error", "dead.json")); err != nil {
		t.Fatalf("Write moved the dead letter: %v", err)
	}
	if _, err := os.Stat(temp); err != nil {
		t.Fatalf("Write removed the temp file: %v", err)
	}

	var finished []replay.Finished
	var removed []queue.Temp
	open(t, dir, queueopen.Options{
		Use:              queueopen.Consume,
		OnReplayFinished: func(f replay.Finished) { finished = append(finished, f) },
		OnTempRemoved:    func(t queue.Temp) { removed = append(removed, t) },
	})
	if len(finished) != 1 || finished[0].Intent.By != "alice" || len(finished[0].Replays) != 1 {
		t.Fatalf("finished = %+v, want alice's replay of one file", finished)
	}
	if _, err := os.Stat(filepath.Join(dir, "inbox", "dead.json")); err != nil {
		t.Errorf("the replayed file is not in inbox/: %v", err)
	}
	if len(removed) != 1 || removed[0].Path() != "inbox/"+queue.TempPrefix+"killed" {
		t.Errorf("removed = %+v, want the one stale temp file", removed)
	}
	if _, err := os.Stat(temp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stale temp file is still there: %v", err)
	}
	left, err := q.Ledger.Replays().Unfinished(t.Context())
	if err != nil || len(left) != 0 {
		t.Errorf("unfinished replays after Consume: %d, %v", len(left), err)
	}
}

// TestStartWithNothingToDoWritesNothing: a start with no replay to finish
// takes no replay lock, so it changes nothing in error/.
func TestStartWithNothingToDoWritesNothing(t *testing.T) {
	dir := newQueue(t)
	q := open(t, dir, queueopen.Options{Use: queueopen.Write})
	before, err := os.Stat(filepath.Join(dir, "error"))
	if err != nil {
		t.Fatal(err)
	}
	if err := queueopen.Start(t.Context(), q.Dir, q.Ledger, queueopen.Options{}); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(filepath.Join(dir, "error"))
	if err != nil {
		t.Fatal(err)
	}
	if !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("error/ changed: %v -> %v", before.ModTime(), after.ModTime())
	}
}

// TestPostgres runs the binding rules on PostgreSQL, each queue in a
// schema of its own. It skips without SPOOL_TEST_POSTGRES (fails with
// CI=true).
func TestPostgres(t *testing.T) {
	base := testenv.Postgres(t)
	dsn := freshSchema(t, base)
	first, second := newQueue(t), newQueue(t)
	withID(t, second)

	_, err := queueopen.Open(t.Context(), first, queueopen.Options{DB: dsn})
	le := refused(t, err, queueopen.NotLedger, ledger.ErrNoLedger)
	if le.Ledger != dsn {
		t.Errorf("Ledger = %q, want the URL %q", le.Ledger, dsn)
	}
	q := open(t, first, queueopen.Options{DB: dsn, Use: queueopen.Consume})
	if got, want := q.Ledger.Dialect().Name(), postgres.Dialect().Name(); got != want {
		t.Fatalf("dialect %s, want %s", got, want)
	}
	qid, _ := q.Dir.ID()
	if lid, _ := q.Ledger.QueueID(t.Context()); lid != qid || qid == "" {
		t.Errorf("ledger's queue %q, queue's %q", lid, qid)
	}
	_, err = queueopen.Open(t.Context(), second, queueopen.Options{DB: dsn, Use: queueopen.Consume})
	refused(t, err, queueopen.BindRefused, ledger.ErrOtherQueue)

	// A queue with history and an empty schema: refused, and the schema
	// is not given the ledger's tables.
	empty := freshSchema(t, base)
	put(t, second, queue.Done, "m1.json", `{"msg_id":"m1","order_no":"A","seq":1,"amount":"1"}`)
	_, err = queueopen.Open(t.Context(), second, queueopen.Options{DB: empty, Use: queueopen.Consume})
	refused(t, err, queueopen.NotLedger, ledger.ErrNewLedger)
	if _, err := queueopen.Open(t.Context(), second, queueopen.Options{DB: empty}); !errors.Is(err, ledger.ErrNoLedger) {
		t.Errorf("the schema holds a ledger after the refusal: %v", err)
	}
}

// freshSchema creates an empty schema on the server at base and returns a
// URL whose search_path is it; the schema is dropped at the end.
func freshSchema(t *testing.T, base string) string {
	t.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	schema := "spool_queueopen_" + hex.EncodeToString(b)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	if _, err := admin.ExecContext(t.Context(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + url.QueryEscape(schema)
}

// TestRebuildingLedgerRefused: a ledger that spool fsck --repair is
// rebuilding (or was killed rebuilding) is refused for every use, so no
// consumer adopts it half-filled.
func TestRebuildingLedgerRefused(t *testing.T) {
	dir := newQueue(t)
	l, err := queueopen.OpenLedger(t.Context(), dir, queueopen.Options{Use: queueopen.Write})
	if err != nil {
		t.Fatal(err)
	}
	d, err := queue.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := ledger.BeginRebuild(t.Context(), l, d, "fsck"); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, use := range []queueopen.Use{queueopen.Read, queueopen.Write, queueopen.Consume} {
		_, err := queueopen.Open(t.Context(), dir, queueopen.Options{Use: use})
		refused(t, err, queueopen.BindRefused, ledger.ErrRebuilding)
	}
}

// TestInit: Init creates a queue with its identity and a ledger bound to
// it, again harmlessly, and refuses another queue's ledger.
func TestInit(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "q")
	for i := 0; i < 2; i++ {
		d, err := queueopen.Init(ctx, dir, queueopen.Options{Use: queueopen.Write})
		if err != nil {
			t.Fatalf("Init #%d: %v", i+1, err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{queue.IDFile, queueopen.DefaultLedger} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("after Init: %v", err)
		}
	}
	other := filepath.Join(t.TempDir(), "other")
	d, err := queueopen.Init(ctx, other, queueopen.Options{Use: queueopen.Write, DB: filepath.Join(dir, queueopen.DefaultLedger)})
	var le *queueopen.LedgerError
	if !errors.As(err, &le) || !errors.Is(err, ledger.ErrOtherQueue) || d != nil {
		t.Fatalf("Init with another queue's ledger = %v, %v; want a LedgerError of ledger.ErrOtherQueue and no queue", d, err)
	}
}

// TestCheckDBName: an empty name and a URL of no registered backend are
// refused, naming the schemes there are; a path, sqlite:PATH and a
// registered URL pass.
func TestCheckDBName(t *testing.T) {
	for s, want := range map[string]string{
		"":                      "empty: give a file path",
		"mysqlx://root@h/spool": `unknown scheme "mysqlx": want `,
		"/srv/q/ledger.db":      "",
		"sqlite:/srv/q/x.db":    "",
		"postgres://u@h/q":      "",
	} {
		err := queueopen.CheckDBName(s)
		if (want == "") != (err == nil) || (err != nil && !strings.HasPrefix(err.Error(), want)) {
			t.Errorf("CheckDBName(%q) = %v, want %q", s, err, want)
		}
	}
}

// Package sqlite is the embedded ledger backend: a single SQLite file, by
// default DIR/ledger.db inside the queue directory, shared by every consumer
// process on the host. It uses modernc.org/sqlite, a pure-Go SQLite, so the
// spool binary builds with CGO_ENABLED=0.
//
// The file must live on a local filesystem: WAL mode relies on shared memory
// that network filesystems do not provide. Consumers on several hosts share a
// PostgreSQL ledger instead.
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	// The "sqlite" database/sql driver.
	_ "modernc.org/sqlite"

	"github.com/spoolq/spool/ledger"
)

// busyTimeout is how long, in milliseconds, a connection waits for another
// process's write transaction before failing with "database is locked". A
// write transaction of the ledger lasts milliseconds, so 30 s only runs out
// when something is badly wrong.
const busyTimeout = 30000

// maxConns is the size of the connection pool. SQLite admits one writer at a
// time per file, so more connections would only wait for the write lock in
// SQLite's busy handler, which polls with sleeps and is unfair; with few
// connections, goroutines instead queue in database/sql's pool, in order and
// without polling. Two rather than one lets a reader (a report, ClaimOutcome)
// run beside a writer, which WAL allows, and keeps the ledger usable if a
// caller ever holds one connection while asking for another.
const maxConns = 2

// walCheckpointPages is the WAL size, in pages, that triggers a checkpoint.
const walCheckpointPages = 20000

// params are applied by the driver to every connection it opens, so no
// connection of the pool can miss one (a PRAGMA run once with db.Exec would
// reach only one connection).
//
//   - busy_timeout: several processes share the file; wait rather than fail.
//   - journal_mode=WAL: readers and the writer do not block each other, and
//     a commit appends to one file.
//   - synchronous=FULL (NORMAL with Options.Relaxed): in WAL mode NORMAL may lose the last commits on power
//     loss; FULL syncs the WAL on every commit, so a row is on disk before its
//     file leaves processing/ (I3).
//   - foreign_keys: off by default in SQLite; on, so a future constraint
//     means the same as on PostgreSQL.
//   - temp_store=MEMORY: statement journals (an INSERT ... ON CONFLICT that
//     may have to undo itself keeps one) and RETURNING's scratch tables
//     would otherwise be temp files under /var/tmp, written page by page:
//     profiling a drain found more writes there than to the ledger itself.
//   - wal_autocheckpoint: how many WAL pages trigger a checkpoint (the
//     default is 1000). Checkpointing every few thousand messages stalled
//     the commits behind it; 20000 pages (80 MiB of WAL at most) drained
//     faster with the same peak memory (docs/PERFORMANCE.md has the
//     figures).
//   - _txlock=immediate: write transactions take the write lock at BEGIN. A
//     deferred transaction that reads first and then writes must upgrade its
//     lock, and two processes doing that at once get SQLITE_BUSY at once,
//     with no waiting, because one of them would have to give up its
//     snapshot. Read-only transactions still begin deferred.
func params(o Options) string {
	sync := "FULL"
	if o.Relaxed {
		sync = "NORMAL"
	}
	return "_pragma=busy_timeout(" + strconv.Itoa(busyTimeout) + ")" +
		"&_pragma=journal_mode(WAL)" +
		"&_pragma=synchronous(" + sync + ")" +
		"&_pragma=foreign_keys(1)" +
		"&_pragma=temp_store(MEMORY)" +
		"&_pragma=wal_autocheckpoint(" + strconv.Itoa(walCheckpointPages) + ")" +
		"&_txlock=immediate"
}

// Options tune the backend. The zero value is the durable default.
type Options struct {
	// Relaxed runs SQLite with synchronous=NORMAL: in WAL mode a commit is
	// then not fsynced, so a power cut (not a crash of the process: the
	// operating system still has the data) may lose the last commits while
	// their files already sit in done/. For users who accept that in
	// exchange for throughput; never the default.
	Relaxed bool
	// MustExist fails the open when the file does not exist or holds no
	// ledger (ledger.ErrNoLedger), instead of creating one: for reports,
	// which must never leave an empty ledger behind a mistyped --db. An
	// SQLite database that holds no ledger is then left as it was (not
	// switched to WAL mode; HoldsLedger).
	MustExist bool
	// ReadOnly opens the ledger for reading only: it must exist and be up
	// to date, nothing in it or beside it is created or changed, and only
	// read access to it is needed (see openReadOnly). For reports.
	ReadOnly bool
}

// Open opens, creating it if needed, the SQLite ledger at path and brings
// its schema up to date. It fails when SQLite declines WAL mode or
// synchronous=FULL rather than run without the settings the invariants rely
// on; SQLite declines a journal mode silently, so Open checks. A path that
// is a directory, in a missing directory, not a database, or read-only (the
// file, its -wal or -shm, or the directory it would be created in) is a
// *FileError naming the file at fault.
func Open(ctx context.Context, path string) (*ledger.DB, error) {
	return OpenWith(ctx, path, Options{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, path string, o Options) (*ledger.DB, error) {
	if o.ReadOnly {
		return openReadOnly(ctx, path)
	}
	if err := checkFiles(path); err != nil {
		return nil, err
	}
	if o.MustExist {
		// Opening switches the file to WAL mode, a change that stays even
		// when the open then finds no ledger in it: a mistyped path that
		// names another SQLite database must leave it as it was.
		if ok, err := HoldsLedger(ctx, path); err != nil {
			return nil, fmt.Errorf("open ledger %s: %w", path, err)
		} else if !ok {
			return nil, fmt.Errorf("open ledger %s: %w", path, ledger.ErrNoLedger)
		}
	}
	// Switching a new file to WAL needs an exclusive lock, and SQLite
	// reports SQLITE_BUSY for it at once, without its busy handler: two
	// consumers starting together on a fresh queue would see one of them
	// fail. So opening retries a busy database, within the busy timeout.
	deadline := time.Now().Add(busyTimeout * time.Millisecond)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		l, err := openOnce(ctx, path, o)
		if err == nil || !Dialect().IsConflict(err) || time.Now().After(deadline) {
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("open ledger %s: %w", path, ctx.Err())
		case <-time.After(wait):
		}
	}
}

func openOnce(ctx context.Context, path string, o Options) (*ledger.DB, error) {
	db, err := open(ctx, path, o)
	if err != nil {
		return nil, openError(path, err)
	}
	// Beside the database's real file, as SQLite puts its -wal and -shm
	// files: processes that name one ledger by two paths (a symlink, a
	// path through another directory) must share one turn.
	real := path
	if p, err := filepath.EvalSymlinks(path); err == nil {
		real = p
	}
	turn := &turnFile{path: real + "-turn", mode: 0o644}
	if fi, err := os.Stat(path); err == nil {
		turn.mode = fi.Mode().Perm()
	}
	l, err := ledger.New(ctx, db, Dialect(), ledger.Options{MustExist: o.MustExist, Turn: turn})
	if err != nil {
		_ = db.Close() // the error that matters is New's
		return nil, openError(path, err)
	}
	return l, nil
}

// open returns a pool on path whose every connection carries params, after
// checking on one of them that the settings took effect.
func open(ctx context.Context, path string, o Options) (*sql.DB, error) {
	dsn, err := dsnFor(path, o)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	if err := check(ctx, db, o); err != nil {
		_ = db.Close() // the error that matters is check's
		return nil, err
	}
	return db, nil
}

// check verifies the settings SQLite may silently decline: journal_mode
// reports the mode in force, which stays the old one when WAL is impossible.
func check(ctx context.Context, db *sql.DB, o Options) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal_mode is %q, want wal (is the file on a local filesystem?)", mode)
	}
	var sync int
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		return err
	}
	if want := map[bool]int{false: 2, true: 1}[o.Relaxed]; sync != want {
		return fmt.Errorf("synchronous is %d, want %d", sync, want)
	}
	return nil
}

// dsnFor returns the modernc.org/sqlite data source name for path: a file:
// URI, so that a path holding '?', '#' or '%' still names the file it says,
// followed by the parameters every connection must carry.
func dsnFor(path string, o Options) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	dsn := "file:" + escapePath(filepath.ToSlash(abs)) + "?" + params(o)
	if o.MustExist {
		// SQLite's own URI parameter: open read-write, never create. The
		// file is also checked before opening, for a clear error; this
		// closes the race with its removal.
		dsn += "&mode=rw"
	}
	return dsn, nil
}

// escapePath percent-encodes what SQLite's URI parser would otherwise read as
// syntax (%, ?, #) and anything outside printable ASCII; SQLite decodes
// %XX in the path before opening the file.
func escapePath(p string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c <= ' ' || c >= 0x7f || c == '%' || c == '?' || c == '#' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
)

// HoldsLedger reports whether the SQLite file at path may hold a
// spool ledger, changing nothing in it: a file in WAL mode may (every
// ledger is), and the open that follows checks it; a database in another
// journal mode is opened read-only and asked for the ledger's
// schema_migrations table. A file that is not an SQLite database is left
// to the open, which names the problem. OpenWith calls it with
// MustExist, so that a --db naming an application's database is refused
// without the open switching that database to WAL for good.
func HoldsLedger(ctx context.Context, path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return true, nil // the open names it
	}
	var hdr [100]byte
	_, rerr := io.ReadFull(f, hdr[:])
	_ = f.Close() // read-only: nothing to lose
	if rerr != nil || string(hdr[:16]) != "SQLite format 3\x00" {
		return true, nil
	}
	if hdr[18] == 2 && hdr[19] == 2 { // WAL
		return true, nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return false, err
	}
	u := url.URL{Scheme: "file", Opaque: (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath(), RawQuery: "mode=ro"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return false, fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&n); err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	return n == 1, nil
}

package ledgertest_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/testenv"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/ledgertest"
	"github.com/spoolq/spool/ledger/mysql"
	"github.com/spoolq/spool/ledger/postgres"
	"github.com/spoolq/spool/ledger/sqlite"
)

// dialects are the backends whose migrations must stay in step: register a
// new backend's dialect here.
var dialects = []ledger.Dialect{sqlite.Dialect(), postgres.Dialect(), mysql.Dialect()}

// TestMigrationsInStep: every engine has the same migrations, numbered from
// 1 in increasing order, so a schema change cannot be made on one and
// forgotten on another. Numbers may skip: they are assigned to changes
// made side by side, and one assigned may land after a later one.
func TestMigrationsInStep(t *testing.T) {
	var first []string
	for i, d := range dialects {
		files, err := fs.Glob(d.Migrations(), "*.up.sql")
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: migrations %q, %v", d.Name(), files, err)
		}
		var names []string
		last := 0
		for _, f := range files {
			num, _, _ := strings.Cut(f, "_")
			v, err := strconv.Atoi(num)
			if err != nil || v <= last {
				t.Errorf("%s: migration %s, want a version above %d", d.Name(), f, last)
			}
			last = v
			names = append(names, strings.TrimSuffix(f, ".up.sql"))
		}
		if i == 0 {
			first = names
		} else if !reflect.DeepEqual(names, first) {
			t.Errorf("migrations differ: %s %q, %s %q", dialects[0].Name(), first, d.Name(), names)
		}
	}
}

// TestScratch: each backend's scratch namespace starts empty, is apart
// from another made from the same DSN, and is gone once dropped.
func TestScratch(t *testing.T) {
	for _, c := range []struct {
		name string
		dsn  func(t *testing.T) string
		// server: a server backend, whose MustExist on an empty namespace
		// fails with ErrNoLedger (SQLite finds no file to open)
		server bool
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "ledger.db") }, false},
		{"postgres", func(t *testing.T) string { return testenv.Postgres(t) }, true},
		{"mysql", func(t *testing.T) string {
			return testenv.Service(t, "SPOOL_TEST_MYSQL", "mysql://root@127.0.0.1:3306/test")
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			server := c.dsn(t)
			t.Parallel()
			ctx := t.Context()
			a, dropA, err := ledger.Scratch(ctx, server)
			if err != nil {
				t.Fatal(err)
			}
			b := ledgertest.Scratch(t, server)
			if a == b || a == server || b == server {
				t.Fatalf("scratch DSNs %q and %q from %q: want two new ones", a, b, server)
			}
			la, err := ledger.Open(ctx, a, ledger.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := la.Close(); err != nil {
				t.Fatal(err)
			}
			// b is another namespace: the ledger created in a is not there
			// (a server says ErrNoLedger; SQLite has no file to open).
			if lb, err := ledger.Open(ctx, b, ledger.OpenOptions{MustExist: true}); err == nil {
				_ = lb.Close()
				t.Fatalf("open %s, MustExist, after a ledger was made in %s: a ledger is there", b, a)
			} else if c.server && !errors.Is(err, ledger.ErrNoLedger) {
				t.Fatalf("open %s, MustExist: %v, want ErrNoLedger", b, err)
			}
			if err := dropA(ctx); err != nil {
				t.Fatal(err)
			}
			// Dropped: nothing of the ledger is left to open.
			if la, err := ledger.Open(ctx, a, ledger.OpenOptions{MustExist: true}); err == nil {
				_ = la.Close()
				t.Fatalf("open %s, MustExist, after its drop: a ledger is still there", a)
			}
		})
	}
}

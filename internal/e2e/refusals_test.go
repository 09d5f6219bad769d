//go:build linux

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/testenv"
	"github.com/spoolq/spool/ledger/ledgertest"

	// The backends, registered for ledgertest.Scratch.
	_ "github.com/spoolq/spool/ledger/mysql"
	_ "github.com/spoolq/spool/ledger/postgres"
)

// TestWrongDBAsked: a --db that names no ledger (a new SQLite path, an
// empty file, an empty PostgreSQL schema or MariaDB database) on a queue
// with history is first of all a wrong --db: every command that would use
// it asks whether --db is right, as the reports do, before it offers a
// repair, and the repair it offers is of that --db, not of the queue's own
// ledger. Nothing is created or changed.
func TestWrongDBAsked(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		db   func(t *testing.T, dir string) string
	}{
		{"new file", func(t *testing.T, dir string) string { return filepath.Join(dir, "other.db") }},
		{"empty file", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "empty.db")
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"empty postgres schema", func(t *testing.T, _ string) string { return ledgertest.Scratch(t, testenv.Postgres(t)) }},
		{"empty mysql database", func(t *testing.T, _ string) string {
			return ledgertest.Scratch(t, testenv.Service(t, envMySQL, "mysql://root@127.0.0.1:3306/test"))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			q := consumedQueue(t)
			other := t.TempDir()
			db := c.db(t, other)
			redeliver(t, q, "m.json")
			roots := []string{q, other}
			before := treeSnapshot(t, roots...)
			for _, args := range [][]string{
				{"consume", q, "--db", db},
				{"flush", q, "--db", db},
				{"replay", q, "--all", "--db", db},
			} {
				r := run(t, args...)
				requireRefusal(t, r, before, roots, "spool: "+args[0]+": ", "(is --db right?)", "Try: fix --db; only if it is right, spool fsck "+q+" --db ", " --repair", "--new-ledger")
				if i, j := strings.Index(r.stderr, "is --db right?"), strings.Index(r.stderr, "--repair"); i < 0 || j < i {
					t.Errorf("spool %q: the repair comes before the question of --db:\n%s", args, r.stderr)
				}
			}
			// The report says it alike.
			requireRefusal(t, run(t, "status", q, "--db", db), before, roots, "(is --db right?")
			// fsck reports the missing ledger of that --db, and the
			// command that repairs it names --db too.
			if strings.HasSuffix(db, ".db") {
				r := mustRun(t, 1, "fsck", q, "--db", db)
				for _, w := range []string{"ledger-missing: the ledger " + db, "(is --db right?)", "only if --db is right, spool fsck " + q + " --db " + db + " --repair",
					"(spool fsck " + q + " --db " + db + " --repair fixes what it can)"} {
					if !strings.Contains(r.stdout, w) {
						t.Errorf("fsck --db %s does not say %q:\n%s", db, w, r)
					}
				}
				if d := diffSnapshots(before, treeSnapshot(t, roots...)); len(d) > 0 {
					t.Errorf("fsck changed %q", d)
				}
			}
		})
	}
}

// TestBadDSNIsUsage: a malformed mysql:// or postgres:// URL, and one that
// names a database (or a PostgreSQL schema) the server does not have, are
// configuration mistakes: exit 2 with one line that says what is wrong and
// what to run, not a runtime failure (exit 3); a hint reads ". Try:", the
// one form every message uses.
func TestBadDSNIsUsage(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	type dsnCase struct{ dsn, want string }
	cases := []dsnCase{
		{"mysql:/x", "bad ledger address: DSN mysql:/x: want mysql://USER[:PASS]@HOST[:PORT]/DB"},
		{"mysql://root@127.0.0.1:3306", "want one database name after the host"},
		{"mysql://root@127.0.0.1:3306/", "want one database name after the host"},
		{"mysql://root@127.0.0.1:99999/x", `port "99999" is not a number from 1 to 65535`},
		{"postgres:/x", "bad ledger address: cannot parse"},
		{"postgres://postgres@127.0.0.1:99999/x", "bad ledger address: cannot parse"},
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	missing := "spool_missing_" + hex.EncodeToString(rnd[:])
	with := func(server, path string, query url.Values) string {
		u, err := url.Parse(server)
		if err != nil {
			t.Fatal(err)
		}
		if path != "" {
			u.Path = "/" + path
		}
		v := u.Query()
		for k, vs := range query {
			v[k] = vs
		}
		u.RawQuery = v.Encode()
		return u.String()
	}
	if server := os.Getenv(envMySQL); server != "" || testenv.CI() {
		server = testenv.Service(t, envMySQL, "mysql://root@127.0.0.1:3306/test")
		cases = append(cases, dsnCase{with(server, missing, nil),
			`bad ledger address: database "` + missing + `" does not exist on the server. Try: CREATE DATABASE ` + missing},
			dsnCase{with(server, "", url.Values{"no_such_setting": {"1"}}),
				"bad ledger address: a parameter of the DSN is neither a driver option nor a server variable"})
	}
	if server := os.Getenv(testenv.PostgresEnv); server != "" || testenv.CI() {
		server = testenv.Postgres(t)
		cases = append(cases,
			dsnCase{with(server, missing, nil),
				`bad ledger address: database "` + missing + `" does not exist on the server. Try: CREATE DATABASE ` + missing},
			dsnCase{with(server, "", url.Values{"search_path": {missing}}),
				`bad ledger address: search_path "` + missing + `" names no existing schema to hold the ledger. Try: CREATE SCHEMA`},
			dsnCase{with(server, "", url.Values{"no_such_setting": {"1"}}),
				`bad ledger address: the server refuses a parameter of the DSN: unrecognized configuration parameter "no_such_setting"`},
			// Without a database pgx would take the user's name's.
			dsnCase{strings.Replace(server, "/"+strings.TrimPrefix(mustURL(t, server).Path, "/"), "", 1),
				"bad ledger address: DSN names no database. Try: postgres://USER@HOST[:PORT]/DB"})
	}
	before := treeSnapshot(t, q)
	for _, c := range cases {
		for _, cmd := range []string{"consume", "status"} {
			r := run(t, cmd, q, "--db", c.dsn)
			requireRefusal(t, r, before, []string{q}, "spool: "+cmd+": ", c.want)
			if strings.Contains(r.stderr, "; Try") {
				t.Errorf("spool %q: a hint after a semicolon, want \". Try:\"\n%s", r.args, r.stderr)
			}
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestConcurrencyRange: a --concurrency out of range is refused with the
// range it takes, whatever else the command line holds; the range's ends
// are accepted.
func TestConcurrencyRange(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	before := treeSnapshot(t, q)
	for _, args := range [][]string{
		{"consume", q, "--concurrency", "0"},
		{"consume", q, "--exec", "true", "--concurrency", "0"},
		{"consume", q, "--post", "http://127.0.0.1:1/", "--concurrency", "-1"},
		{"consume", q, "--exec", "true", "--concurrency", "1025"},
		{"bench", "--handler", "post", "--latency", "1ms", "--concurrency", "0"},
	} {
		requireRefusal(t, run(t, args...), before, []string{q}, "spool: "+args[0]+": --concurrency "+args[len(args)-1]+": want 1 to 1024 calls at once. Try: spool help "+args[0])
	}
	for _, n := range []string{"1", "1024"} {
		requireStats(t, "--concurrency "+n, mustRun(t, 0, "consume", q, "--exec", "true", "--concurrency", n), consumeStats{})
	}
}

//go:build linux

package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// settingAttempts are, per engine, statements of a --sql file that would
// change the ledger's session under it, each with what the refusal must
// say. Only the session's: a spool that let them through must harm no
// other test.
var settingAttempts = map[string][]struct{ stmt, want string }{
	"sqlite": {
		{"PRAGMA synchronous = OFF", "PRAGMA synchronous: below FULL a power cut may take back a commit"},
		{"PRAGMA journal_mode = DELETE", "PRAGMA journal_mode: the ledger runs in WAL mode"},
		{"ATTACH DATABASE ':memory:' AS other", "ATTACH: a transaction over two database files is not atomic"},
	},
	"postgres": {
		{"SET synchronous_commit = off", "SET synchronous_commit: off lets a commit return before its row is on disk"},
		{"SET LOCAL synchronous_commit TO off", "SET LOCAL synchronous_commit: off lets a commit return"},
		{"SELECT set_config('synchronous_commit', 'off', true)", "set_config('synchronous_commit', ...) (SET by another name): off lets a commit return"},
		{"SET session_replication_role = replica", "SET session_replication_role: replica turns off triggers"},
		{"SET search_path = public", "SET search_path: it decides which schema the ledger's own tables"},
	},
	"mysql": {
		{"SET autocommit = 1", "SET autocommit: SET autocommit = 1 commits the ledger's open transaction"},
		{"SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED", "SET SESSION TRANSACTION: the ledger's transactions run at READ COMMITTED"},
		{"SET sql_log_bin = 0", "SET sql_log_bin: off keeps the business writes"},
		{"SET foreign_key_checks = 0", "SET foreign_key_checks: off lets in rows"},
		// No SET GLOBAL here: on a spool that did not refuse it, the test
		// would change the shared server under every other test.
	},
}

// TestSQLRefusesSettings: a --sql file that would change the session's
// settings under the ledger (synchronous_commit off, a PRAGMA, MariaDB's
// autocommit...) is refused at start, on each engine, with exit 2 and one
// line naming the statement, its line, what it does and why; nothing is
// consumed. The same setting in the DSN is refused by the backend
// (ErrNotDurable): the script may not make it either.
func TestSQLRefusesSettings(t *testing.T) {
	t.Parallel()
	for _, e := range ledgerEngines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			dsn := e.dsn(t)
			q, state := workQueue(t)
			putMessage(t, q, "a.json", orderMessage("a", "A", 1, "1.00"))
			for i, a := range settingAttempts[e.name] {
				file := writeFile(t, state, fmt.Sprintf("s%d.sql", i), "-- valid on every engine\nSELECT 1;\n\n"+a.stmt+";\n")
				args := []string{"consume", q, "--sql", file}
				if dsn != "" {
					args = append(args, "--db", dsn)
				}
				r := run(t, args...)
				want := "spool: consume: --sql " + file + ": statement 2 (line 4): " + a.want
				if r.code != 2 || !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
					t.Errorf("%s: want exit 2 and one line beginning %q\n%s", a.stmt, want, r)
				}
			}
			if n := countNames(t, q, inbox); n != 1 {
				t.Errorf("inbox/ holds %d messages after the refused runs, want 1", n)
			}
		})
	}
}

// TestSQLSessionResetPostgres: a function that a --sql file calls, which
// no check of the file can see into, turns synchronous_commit off and
// moves search_path for the whole session; the ledger puts both back
// after each message's statements, so every message's statements, the
// ledger's own and the commit run with the session's own settings: each
// message records synchronous_commit on, and the batch commits in the
// ledger's schema.
func TestSQLSessionResetPostgres(t *testing.T) {
	t.Parallel()
	dsn, admin := postgresServer(t)
	schema := postgresSchema(t, admin,
		`CREATE TABLE %s.seen (msg_id TEXT PRIMARY KEY, sync TEXT NOT NULL)`,
		`CREATE FUNCTION %[1]s.weaken() RETURNS void LANGUAGE sql AS $$
			SELECT set_config('synchronous_commit', 'off', false), set_config('search_path', 'pg_catalog', false)
		$$`)
	q, state := workQueue(t)
	sqlFile := writeFile(t, state, "weaken.sql", `INSERT INTO seen (msg_id, sync) VALUES (:msg_id, current_setting('synchronous_commit'));
SELECT weaken();
`)
	const n = 6
	for i := range n {
		putMessage(t, q, fmt.Sprintf("m%d.json", i), orderMessage(fmt.Sprintf("m%d", i), "A", i+1, "1.00"))
	}
	r := mustRun(t, 0, "consume", q, "--db", withSearchPath(t, dsn, schema), "--sql", sqlFile, "--batch", "3")
	if st := parseStats(t, r); st.Processed != n {
		t.Fatalf("stats %+v, want %d processed\n%s", st, n, r)
	}
	var on, all int
	if err := admin.QueryRow(`SELECT COUNT(*) FILTER (WHERE sync = 'on'), COUNT(*) FROM `+schema+`.seen`).Scan(&on, &all); err != nil {
		t.Fatal(err)
	}
	if on != n || all != n {
		t.Errorf("%d of %d messages ran with synchronous_commit on, want all %d: a setting the script's function made outlived its message", on, all, n)
	}
	if got := countNames(t, q, done); got != n {
		t.Errorf("done/ holds %d files, want %d", got, n)
	}
}

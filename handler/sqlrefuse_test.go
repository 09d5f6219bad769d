package handler

import (
	"strings"
	"testing"
)

// TestParseSQLRefusesSettings: a script that would end the ledger's
// transaction or change its session's settings is refused, naming the
// statement, its line, what it does and why, on every engine's syntax.
func TestParseSQLRefusesSettings(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		// Transaction control.
		{"BEGIN;\nINSERT INTO t VALUES (:msg_id);\nCOMMIT;", "statement 1 (line 1): BEGIN: the statements already run inside the ledger's transaction"},
		{"INSERT INTO t VALUES (:msg_id);\n\ncommit", "statement 2 (line 3): COMMIT: "},
		{"XA START 'x'", "statement 1 (line 1): XA: "},
		{"PREPARE TRANSACTION 'x'", "statement 1 (line 1): PREPARE: "},
		{"LOCK TABLES t WRITE", "statement 1 (line 1): LOCK TABLES: it commits the ledger's open transaction (MariaDB)"},
		{"LOCK TABLE t READ", "LOCK TABLES: it commits"},
		{"UNLOCK TABLES", "UNLOCK TABLES: it commits"},
		// PostgreSQL.
		{"SET synchronous_commit = off", "statement 1 (line 1): SET synchronous_commit: off lets a commit return before its row is on disk"},
		{"INSERT INTO t VALUES (:msg_id);\n-- a comment\nSET LOCAL synchronous_commit TO off;", "statement 2 (line 3): SET LOCAL synchronous_commit: off lets a commit return"},
		{"set session synchronous_commit = 'local'", "SET SESSION synchronous_commit: off lets"},
		{"SELECT set_config('synchronous_commit', 'off', true)", "statement 1 (line 1): set_config('synchronous_commit', ...) (SET by another name): off lets a commit return"},
		{"SELECT 1;\nSELECT\n  pg_catalog.SET_CONFIG('search_path', 'other', false)", "statement 2 (line 3): set_config('search_path', ...) (SET by another name): it decides which schema the ledger's own tables"},
		{`SELECT "set_config"(:k, 'off', true)`, "set_config(...) (SET by another name): a setting the script changes stays"},
		{"UPDATE pg_settings SET setting = 'off' WHERE name = 'synchronous_commit'", "UPDATE pg_settings (SET by another name)"},
		{"WITH x AS (UPDATE pg_catalog.pg_settings SET setting = 'off' WHERE name = 'fsync' RETURNING 1) SELECT 1", "UPDATE pg_settings"},
		{"RESET synchronous_commit", "RESET synchronous_commit: off lets"},
		{"RESET ALL", "RESET ALL: RESET ALL puts back every setting"},
		{"SET session_replication_role = replica", "SET session_replication_role: replica turns off triggers and foreign keys, the ledger's outbox order trigger among them"},
		{"SET search_path TO other, public", "SET search_path: it decides which schema"},
		{"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", "SET TRANSACTION: the ledger's transactions run at READ COMMITTED"},
		{"SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", "SET SESSION CHARACTERISTICS: the ledger's transactions run at READ COMMITTED"},
		{"SET default_transaction_isolation = 'serializable'", "SET default_transaction_isolation: the ledger's transactions run at READ COMMITTED"},
		{"SET statement_timeout = 0", "SET statement_timeout: it bounds the ledger's own statements too"},
		{"SET LOCAL lock_timeout = '1s'", "SET LOCAL lock_timeout: it bounds the ledger's own waits"},
		{"SET ROLE reporting", "SET ROLE: the ledger's own statements would run as another user"},
		{"SET SESSION AUTHORIZATION bob", "SET SESSION AUTHORIZATION: the ledger's own statements would run as another user"},
		{"SET TIME ZONE 'UTC'", "SET TIME ZONE: a setting the script changes stays on the ledger's connection"},
		{"SET myapp.tenant = 'x'", "SET myapp.tenant: a setting the script changes stays"},
		{"ALTER ROLE spool SET synchronous_commit = off", "ALTER ROLE ... SET: it changes the settings of the ledger's next sessions"},
		// MariaDB.
		{"SET autocommit = 1", "SET autocommit: SET autocommit = 1 commits the ledger's open transaction"},
		{"SET @@session.autocommit = 0", "SET SESSION autocommit: "},
		{"SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED", "SET SESSION TRANSACTION: the ledger's transactions run at READ COMMITTED"},
		{"SET sql_log_bin = 0", "SET sql_log_bin: off keeps the business writes"},
		{"SET GLOBAL innodb_flush_log_at_trx_commit = 2", "SET GLOBAL innodb_flush_log_at_trx_commit: it is the server's, for every client (SET GLOBAL only)"},
		{"SET GLOBAL max_connections = 10", "SET GLOBAL max_connections: SET GLOBAL changes the server for every client"},
		{"SET foreign_key_checks = 0", "SET foreign_key_checks: off lets in rows"},
		{"SET sql_mode = ''", "SET sql_mode: the ledger's SQL means what it says only in the sql_mode it sets"},
		{"SET NAMES latin1", "SET NAMES: the ledger compares its keys byte for byte"},
		{"SET STATEMENT max_statement_time = 1 FOR SELECT 1", "SET statement: a setting the script changes"},
		{"SELECT 1 /*! ; SET autocommit = 1 */", "line 1: /*! comment: MariaDB runs its text as SQL"},
		{"SELECT 1;\nSELECT 2 /*M!100000 , 3 */", "line 2: /*M! comment: MariaDB runs its text as SQL"},
		// SQLite.
		{"PRAGMA synchronous = OFF", "statement 1 (line 1): PRAGMA synchronous: below FULL a power cut may take back a commit"},
		{"PRAGMA main.journal_mode = DELETE", "PRAGMA journal_mode: the ledger runs in WAL mode"},
		{"PRAGMA foreign_keys = OFF", "PRAGMA foreign_keys: off lets in rows"},
		{"pragma user_version", "PRAGMA user_version: a PRAGMA sets the ledger's connection"},
		{"ATTACH DATABASE '/tmp/x.db' AS x", "statement 1 (line 1): ATTACH: a transaction over two database files is not atomic in WAL mode"},
		{"DETACH x", "DETACH: a transaction over two database files"},
		{"VACUUM", "VACUUM cannot run inside a transaction"},
	} {
		_, err := ParseSQL(tt.src)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseSQL(%q) = %v, want an error containing %q", tt.src, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseSQL(%q): %q is not one line", tt.src, err)
		}
	}
}

// TestParseSQLSettingsNoFalsePositive: the words of a refusal in a
// string, a comment, a quoted name, a longer name, a parameter or an
// UPDATE's SET clause are no refusal.
func TestParseSQLSettingsNoFalsePositive(t *testing.T) {
	for _, src := range []string{
		"INSERT INTO t (msg_id, set_config_x) VALUES (:msg_id, 'SET synchronous_commit = off')",
		"INSERT INTO audit (msg_id, note) VALUES (:msg_id, $$SET LOCAL synchronous_commit TO off; PRAGMA synchronous = 0$$)",
		"-- SET synchronous_commit = off\nINSERT INTO t VALUES (:msg_id) /* set_config('x', 'y', true) */",
		"UPDATE balances SET cents = cents + 1 WHERE order_no = :order_no",
		"INSERT INTO orders (order_no, n) VALUES (:order_no, 1) ON CONFLICT (order_no) DO UPDATE SET n = orders.n + 1",
		"SELECT set_config FROM settings_copy WHERE k = :msg_id",
		`SELECT "SET", "pragma", reset FROM t WHERE "set_config" = :msg_id`,
		"INSERT INTO t (setting) SELECT current_setting('synchronous_commit')",
		"UPDATE pg_settings_copy SET setting = :amount",
		"LOCK TABLE balances IN SHARE ROW EXCLUSIVE MODE",
		"INSERT INTO t VALUES (:set, :pragma, @reset)",
		"SELECT data #> '{a,b}' FROM t WHERE x = :msg_id",
		"INSERT INTO t (begin_at, commit_no) VALUES (:seq, :seq)",
	} {
		if _, err := ParseSQL(src); err != nil {
			t.Errorf("ParseSQL(%q): %v, want no refusal", src, err)
		}
	}
}

// TestImplicitCommit: on an engine whose DDL commits the open transaction
// (MariaDB), the statements that do so are refused, naming the statement
// and its line; a TEMPORARY table's, and the statements a message runs,
// are not.
func TestImplicitCommit(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"CREATE TABLE IF NOT EXISTS b (k TEXT);\nINSERT INTO b VALUES (:msg_id)", "statement 1 (line 1): CREATE: on a mysql ledger it commits the ledger's open transaction"},
		{"INSERT INTO b VALUES (:msg_id);\n\ncreate index i on b (k)", "statement 2 (line 3): CREATE: "},
		{"ALTER TABLE b ADD COLUMN n INT", "ALTER: "},
		{"DROP TABLE b", "DROP: "},
		{"CREATE OR REPLACE TABLE b (k INT)", "CREATE: "},
		{"TRUNCATE b", "TRUNCATE: "},
		{"RENAME TABLE a TO b", "RENAME: "},
		{"GRANT SELECT ON b TO x", "GRANT: "},
		{"ANALYZE TABLE b", "ANALYZE: "},
		{"CHECK TABLE b", "CHECK: "},
		{"LOAD INDEX INTO CACHE b", "LOAD: "},
		{"FLUSH TABLES", "FLUSH: "},
		{"CREATE TEMPORARY TABLE t (k INT)", ""},
		{"CREATE OR REPLACE TEMPORARY TABLE t (k INT)", ""},
		{"DROP TEMPORARY TABLE IF EXISTS t", ""},
		{"INSERT INTO b VALUES (:msg_id);\nUPDATE c SET n = n + 1 WHERE k = :order_no", ""},
		{"LOAD DATA INFILE '/x' INTO TABLE b", ""},
		{"ANALYZE SELECT 1", ""},
	} {
		script, err := ParseSQL(tt.src)
		if err != nil {
			t.Fatalf("%q: %v", tt.src, err)
		}
		got := ""
		for i, s := range script.statements {
			if err := implicitCommit("mysql", i+1, s); err != nil {
				got = err.Error()
				break
			}
		}
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("%q: %q, want %q", tt.src, got, tt.want)
		}
	}
}

package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestConsumeHandlerFlagsRefused: a bad handler command line is a usage
// error (exit 2, one line) that changes nothing in the queue.
func TestConsumeHandlerFlagsRefused(t *testing.T) {
	q := newQueue(t)
	write(t, filepath.Join(q, "inbox", "a.json"), msg("1", "A", 1, "1.00"))
	dir := t.TempDir()
	sqlFile := func(name, text string) string {
		p := filepath.Join(dir, name)
		write(t, p, text)
		return p
	}
	good := sqlFile("good.sql", "INSERT INTO t VALUES (:msg_id);")
	before := listing(t, q)
	for _, tt := range []struct {
		args []string
		sub  string
	}{
		{[]string{"--exec", "true", "--sql", good}, "--exec and --sql: choose one handler"},
		{[]string{"--post", "http://127.0.0.1:1/", "--exec", "true"}, "--exec and --post: choose one handler"},
		{[]string{"--exec", ""}, "--exec is empty"},
		{[]string{"--retry-max", "3"}, "--retry-max needs a handler"},
		{[]string{"--retry-jitter=false"}, "--retry-jitter needs a handler"},
		{[]string{"--sql", good, "--exec-timeout", "1s"}, "--exec-timeout needs --exec"},
		{[]string{"--exec", "true", "--post-timeout", "1s"}, "--post-timeout needs --post"},
		{[]string{"--exec", "true", "--exec-timeout", "0s"}, "--exec-timeout 0s"},
		{[]string{"--exec", "true", "--retry-max", "0"}, "--retry-max 0"},
		{[]string{"--exec", "true", "--retry-base", "-1s"}, "--retry-base -1s"},
		{[]string{"--exec", "true", "--retry-base", "2s", "--retry-cap", "1s"}, "shorter than --retry-base"},
		{[]string{"--post", "ftp://example.com/"}, "want an http:// or https:// URL"},
		{[]string{"--post", "http:///nohost"}, "want an http:// or https:// URL"},
		{[]string{"--sql", filepath.Join(dir, "missing.sql")}, "no such file"},
		{[]string{"--sql", sqlFile("empty.sql", "")}, "no SQL statement"},
		{[]string{"--sql", sqlFile("comments.sql", "-- only a comment;\n/* and ; this */\n")}, "no SQL statement"},
		{[]string{"--sql", sqlFile("quote.sql", "SELECT 'x")}, "unterminated '"},
		{[]string{"--sql", sqlFile("positional.sql", "SELECT ?")}, "positional parameter"},
		{[]string{"--sql", sqlFile("commit.sql", "BEGIN;\nINSERT INTO t VALUES (:msg_id);\nCOMMIT;")}, "statement 1 (line 1): BEGIN: the statements already run inside the ledger's transaction"},
		{[]string{"--sql", sqlFile("release.sql", "INSERT INTO t VALUES (:msg_id);\n-- done\nrelease\tspool_message")}, "statement 2 (line 3): RELEASE"},
		{[]string{"--sql", sqlFile("syntax.sql", "CREATE TABLE IF NOT EXISTS t (k TEXT);\nSELEC :msg_id")}, "statement 2 (line 2)"},
		{[]string{"--sql", sqlFile("notable.sql", "INSERT INTO nowhere VALUES (:msg_id)")}, "no such table: nowhere"},
		{[]string{"--exec", "true", "--exec-timeout", "2m"}, "--exec-timeout 2m0s: want less than the claim lease, 2m0s"},
		{[]string{"--post", "http://127.0.0.1:1/", "--post-timeout", "1h"}, "--post-timeout 1h0m0s: want less than the claim lease"},
		{[]string{"--exec", "true", "--lease", "10s", "--exec-timeout", "10s"}, "--exec-timeout 10s: want less than the claim lease, 10s (--lease)"},
		{[]string{"--lease", "2s"}, "--lease 2s: want 3s or more"},
		{[]string{"--lease", "-1m"}, "--lease -1m0s: want 3s or more"},
		{[]string{"--concurrency", "2"}, "--concurrency needs --exec or --post"},
		{[]string{"--sql", good, "--ordered"}, "--ordered needs --exec or --post"},
		{[]string{"--rate", "5/s"}, "--rate needs --exec or --post"},
		{[]string{"--exec", "true", "--rate", "fast"}, `--rate "fast": want calls per second`},
		{[]string{"--exec", "true", "--rate", "0/s"}, `--rate "0/s"`},
		{[]string{"--exec", "true", "--rate", "-3"}, `--rate "-3"`},
		{[]string{"--exec", "true", "--pause-after", "-1"}, "--pause-after -1"},
		{[]string{"--sql", good, "--concurrency", "2"}, "--concurrency needs --exec or --post"},
		{[]string{"--exec", "true", "--concurrency", "0"}, "--concurrency 0: want 1 to 1024 calls at once"},
		{[]string{"--on-dead-letter", ""}, "--on-dead-letter is empty"},
		{[]string{"--on-dead-letter", "true", "--on-dead-letter-timeout", "0s"}, "--on-dead-letter-timeout 0s"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := cli(t, append([]string{"consume", q}, tt.args...)...)
			r.wantFail(t, 2, "consume", tt.sub)
		})
	}
	if after := listing(t, q); after != before {
		t.Errorf("a refused command changed the queue:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestSQLCheckSeesTablesItCreates: a parameterless statement (a CREATE
// TABLE IF NOT EXISTS) is run during the startup check, so that the
// statements after it compile; the check itself leaves nothing behind.
func TestSQLCheckSeesTablesItCreates(t *testing.T) {
	q := newQueue(t)
	f := filepath.Join(t.TempDir(), "s.sql")
	write(t, f, "CREATE TABLE IF NOT EXISTS seen (msg_id TEXT PRIMARY KEY);\nINSERT INTO seen VALUES (:msg_id);\n")
	cli(t, "consume", q, "--sql", f).want(t, 0, "processed=0 duplicates=0 dead-letters=0 recovered=0\n")
	write(t, filepath.Join(q, "inbox", "a.json"), msg("1", "A", 1, "1.00"))
	cli(t, "consume", q, "--sql", f).want(t, 0, "processed=1 duplicates=0 dead-letters=0 recovered=0\n")
}

// TestLeaseRaisesTimeoutBound: --lease (here from SPOOL_LEASE, as every
// flag may be) moves the bound the handler timeouts must stay under: a
// 3m --exec-timeout, refused under the default 2m lease, runs under a 5m
// one; the flag given wins over the environment.
func TestLeaseRaisesTimeoutBound(t *testing.T) {
	q := newQueue(t)
	cli(t, "consume", q, "--exec", "true", "--exec-timeout", "3m").
		wantFail(t, 2, "consume", "--exec-timeout 3m0s: want less than the claim lease, 2m0s")
	t.Setenv("SPOOL_LEASE", "5m")
	cli(t, "consume", q, "--exec", "true", "--exec-timeout", "3m").
		want(t, 0, "processed=0 duplicates=0 dead-letters=0 recovered=0\n")
	cli(t, "consume", q, "--exec", "true", "--exec-timeout", "3m", "--lease", "3m").
		wantFail(t, 2, "consume", "--exec-timeout 3m0s: want less than the claim lease, 3m0s (--lease)")
}

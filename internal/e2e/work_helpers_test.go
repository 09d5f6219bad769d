//go:build linux

package e2e

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	// The "pgx" database/sql driver, for the PostgreSQL ledger tests.
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/spoolq/spool/internal/testenv"
)

// readLines reads a file the test's scripts append to; a file not yet
// created has no lines.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return lines(string(data))
}

// needNanoDate skips the test where date(1) cannot print nanoseconds
// (date +%s%N is GNU): the scripts time their attempts with it.
func needNanoDate(t *testing.T) {
	t.Helper()
	out, err := exec.Command("date", "+%s%N").Output()
	if _, perr := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err != nil || perr != nil {
		t.Skipf("date +%%s%%N does not print nanoseconds here (%q, %v)", out, err)
	}
}

// stamps reads a file of date +%s%N lines as times.
func stamps(t *testing.T, path string) []time.Time {
	t.Helper()
	var ts []time.Time
	for _, l := range readLines(t, path) {
		ns, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			t.Fatalf("%s: bad stamp %q", path, l)
		}
		ts = append(ts, time.Unix(0, ns))
	}
	return ts
}

// gaps returns the durations between consecutive times.
func gaps(ts []time.Time) []time.Duration {
	var gs []time.Duration
	for i := 1; i < len(ts); i++ {
		gs = append(gs, ts[i].Sub(ts[i-1]))
	}
	return gs
}

// prepareLedger runs statements on a queue's ledger before spool consumes
// it, as an operator creates the business tables a --sql file writes.
func prepareLedger(t *testing.T, q string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(q, "ledger.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// deadLetter is the ledger's dead-letter record of a file in error/.
type deadLetter struct {
	Reason, Detail string
	Attempts       int
}

// deadLetterOf returns the latest dead-letter record of the file that had
// name in inbox/.
func deadLetterOf(t *testing.T, db *sql.DB, name string) deadLetter {
	t.Helper()
	var d deadLetter
	err := db.QueryRow(`SELECT reason, COALESCE(detail, ''), COALESCE(attempts, 0) FROM deliveries
		WHERE outcome = 'dead-letter' AND file = ? ORDER BY id DESC LIMIT 1`, name).Scan(&d.Reason, &d.Detail, &d.Attempts)
	if err != nil {
		t.Fatalf("dead letter of %s: %v", name, err)
	}
	return d
}

// errorsCSV runs spool errors and returns its rows as file -> reason.
func errorsCSV(t *testing.T, q string) map[string]string {
	t.Helper()
	r := mustRun(t, 0, "errors", q)
	ls := lines(r.stdout)
	if len(ls) == 0 || ls[0] != "file,reason" {
		t.Fatalf("spool errors: want the header file,reason\n%s", r)
	}
	m := map[string]string{}
	for _, l := range ls[1:] {
		f, reason, ok := strings.Cut(l, ",")
		if !ok {
			t.Fatalf("spool errors: bad row %q", l)
		}
		m[f] = reason
	}
	return m
}

// attemptsOf returns the attempt count the ledger keeps for a msg_id
// waiting for a retry, and false when it keeps none.
func attemptsOf(t *testing.T, db *sql.DB, msgID string) (int, bool) {
	t.Helper()
	var n int
	err := db.QueryRow(`SELECT attempts FROM attempts WHERE msg_id = ?`, msgID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false
	}
	if err != nil {
		t.Fatalf("attempts of %s: %v", msgID, err)
	}
	return n, true
}

// orderMessage is a valid message of the default contract.
func orderMessage(id, order string, seq int, amount string) string {
	return `{"msg_id":"` + id + `","order_no":"` + order + `","seq":` + strconv.Itoa(seq) + `,"amount":"` + amount + `"}`
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// attemptState is one state of a msg_id's row in the ledger's attempts
// table: the count, when the last failed attempt's transaction began (the
// ledger counts the delay from there) and when the next attempt is due.
type attemptState struct {
	Attempts            int
	LastFailure, NextAt time.Time
}

// ledgerTime is the layout of the ledger's timestamp columns.
const ledgerTime = "2006-01-02T15:04:05.000000Z"

// watchAttempts polls the attempts row of msgID while spool runs and
// records every distinct state it sees; stop ends the polling and returns
// them. A retry's state lasts as long as its delay, so polling every few
// milliseconds sees each one.
func watchAttempts(t *testing.T, db *sql.DB, msgID string) (stop func() []attemptState) {
	t.Helper()
	quit, finished := make(chan struct{}), make(chan struct{})
	var seen []attemptState
	var pollErr error
	go func() {
		defer close(finished)
		for {
			var s attemptState
			var last, next string
			err := db.QueryRow(`SELECT attempts, last_failure, next_at FROM attempts WHERE msg_id = ?`, msgID).Scan(&s.Attempts, &last, &next)
			switch {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				pollErr = err
				return
			default:
				s.LastFailure, err = time.Parse(ledgerTime, last)
				if err == nil {
					s.NextAt, err = time.Parse(ledgerTime, next)
				}
				if err != nil {
					pollErr = err
					return
				}
				if len(seen) == 0 || seen[len(seen)-1] != s {
					seen = append(seen, s)
				}
			}
			select {
			case <-quit:
				return
			case <-time.After(2 * time.Millisecond): // poll interval
			}
		}
	}()
	return func() []attemptState {
		t.Helper()
		close(quit)
		<-finished
		if pollErr != nil {
			t.Fatalf("poll attempts of %s: %v", msgID, pollErr)
		}
		return seen
	}
}

// postgresServer returns the test server's DSN and a connection to it,
// skipping the test when none is configured (CI must configure one).
func postgresServer(t *testing.T) (string, *sql.DB) {
	t.Helper()
	dsn := testenv.Postgres(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return dsn, db
}

// postgresSchema creates a schema of the test's own, runs stmts in it
// (each with %s for the schema's name) and drops it when the test ends.
func postgresSchema(t *testing.T, admin *sql.DB, stmts ...string) string {
	t.Helper()
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	schema := "spool_e2e_" + hex.EncodeToString(rnd[:])
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	for _, s := range stmts {
		if _, err := admin.Exec(fmt.Sprintf(s, schema)); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return schema
}

// withSearchPath adds search_path=schema to a DSN, URL or keyword/value.
func withSearchPath(t *testing.T, dsn, schema string) string {
	t.Helper()
	if !strings.Contains(dsn, "://") {
		return dsn + " search_path=" + schema
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("%s: %v", testenv.PostgresEnv, err)
	}
	v := u.Query()
	v.Set("search_path", schema)
	u.RawQuery = v.Encode()
	return u.String()
}

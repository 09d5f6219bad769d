//go:build linux

package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// callServer is the downstream of --post tests: a real HTTP server that
// answers after a latency and counts, per Idempotency-Key, the requests it
// saw and when each began, and how many were in flight at once.
type callServer struct {
	URL     string
	latency time.Duration
	mu      sync.Mutex
	// onFirst, when set, runs the first time a key arrives, while that
	// request is in flight (before the server answers it).
	onFirst func(key string) error
	// answer, when set, chooses the status of a key's nth request (0 the
	// first) and its Retry-After ("" for none); 0 means 200.
	answer func(key string, nth int) (int, string)

	starts map[string][]time.Time
	// gone[key][i] is set when the client of the key's i-th request went
	// away before it was answered: the consumer making it was killed.
	gone        map[string][]bool
	inFlight    int
	maxInFlight int
	errs        []error
	// Per order_no of the messages posted: the seqs in the order their
	// requests arrived, how many were in flight now, and at most.
	seqs     map[string][]int64
	orderNow map[string]int
	orderMax int
	// refused are the times of the answers other than 200.
	refused []time.Time
}

func newCallServer(t *testing.T, latency time.Duration) *callServer {
	t.Helper()
	s := &callServer{latency: latency, starts: map[string][]time.Time{}, gone: map[string][]bool{},
		seqs: map[string][]int64{}, orderNow: map[string]int{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func (s *callServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m struct {
		OrderNo string `json:"order_no"`
		Seq     int64  `json:"seq"`
	}
	_ = json.Unmarshal(body, &m)
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	onFirst, answer := s.onFirst, s.answer
	s.seqs[m.OrderNo] = append(s.seqs[m.OrderNo], m.Seq)
	s.orderNow[m.OrderNo]++
	s.orderMax = max(s.orderMax, s.orderNow[m.OrderNo])
	s.starts[key] = append(s.starts[key], time.Now())
	s.gone[key] = append(s.gone[key], false)
	nth := len(s.starts[key]) - 1
	first := nth == 0
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.orderNow[m.OrderNo]--
		// The server cancels a request's context when its client closes
		// the connection, as a killed process's kernel does.
		s.gone[key][nth] = r.Context().Err() != nil
		s.mu.Unlock()
	}()
	if first && onFirst != nil {
		if err := onFirst(key); err != nil {
			s.mu.Lock()
			s.errs = append(s.errs, err)
			s.mu.Unlock()
		}
	}
	code, after := http.StatusOK, ""
	if answer != nil {
		if c, a := answer(key, nth); c != 0 {
			code, after = c, a
		}
	}
	if code == http.StatusOK {
		time.Sleep(s.latency) // the downstream's latency, not a synchronisation
	}
	if after != "" {
		w.Header().Set("Retry-After", after)
	}
	w.WriteHeader(code)
	if code != http.StatusOK {
		s.mu.Lock()
		s.refused = append(s.refused, time.Now())
		s.mu.Unlock()
	}
}

// waitInFlight waits until n requests are in flight, for at most d, and
// reports whether they were.
func (s *callServer) waitInFlight(n int, d time.Duration) bool {
	return poll(d, time.Millisecond, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.inFlight >= n
	})
}

// seen returns the number of requests per key and the most in flight at once.
func (s *callServer) seen(t *testing.T) (map[string]int, int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, err := range s.errs {
		t.Errorf("server: %v", err)
	}
	n := make(map[string]int, len(s.starts))
	for k, v := range s.starts {
		n[k] = len(v)
	}
	return n, s.maxInFlight
}

// deliver puts a message into inbox/ as a producer must (hidden name, then
// rename); safe outside the test's goroutine.
func deliver(q, name, body string) error {
	tmp := filepath.Join(q, inbox, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(q, inbox, name))
}

// callLedger is where a --post test's ledger lives: the queue's SQLite file,
// a PostgreSQL schema or a MariaDB database of the test's own (ledgerBackend).
type callLedger struct {
	args  []string // consume's --db flag, if any
	db    *sql.DB
	table func(name string) string
}

func (l callLedger) count(t *testing.T, query string) int {
	t.Helper()
	return count(t, l.db, fmt.Sprintf(query, l.table("processed"), l.table("deliveries"),
		l.table("reservations"), l.table("attempts")))
}

// ledgerBackend is a ledger backend the e2e tests run on: what differs
// between the backends is here, in a table the tests range over, and
// never in a comparison of engine names (internal/archtest checks it).
type ledgerBackend struct {
	// name names the backend: its subtests and bench's report.
	name string
	// open gives a --post test a ledger of its own beside queue q: the
	// queue's SQLite file, a PostgreSQL schema (SPOOL_TEST_POSTGRES) or a
	// MariaDB database (SPOOL_TEST_MYSQL). Without the server's variable
	// the test skips (fails when CI=true).
	open func(t *testing.T, q string) callLedger
	// crash gives a crash or concurrency test its ledger: for SQLite the
	// queue's own file with no --db and no connection (checkFinalOn reads
	// the file), elsewhere as open does.
	crash func(t *testing.T, q string) callLedger
	// db returns the --db flag of a run given the server, which makes its
	// own ledgers there (bench): none for SQLite, which needs no server.
	db func(t *testing.T) []string
}

// The backends, for the tests that run on several.
var (
	sqliteEngine = ledgerBackend{name: "sqlite", open: sqliteCallLedger,
		crash: func(*testing.T, string) callLedger { return callLedger{} },
		db:    func(*testing.T) []string { return nil }}
	postgresEngine = ledgerBackend{name: "postgres", open: postgresCallLedger, crash: postgresCallLedger,
		db: func(t *testing.T) []string { dsn, _ := postgresServer(t); return []string{"--db", dsn} }}
	mysqlEngine = ledgerBackend{name: "mysql", open: mysqlCallLedger, crash: mysqlCallLedger,
		db: func(t *testing.T) []string { dsn, _ := mysqlDatabase(t); return []string{"--db", dsn} }}
)

// sqliteCallLedger is ledgerBackend.open of SQLite: the queue's ledger.db, read
// only.
func sqliteCallLedger(t *testing.T, q string) callLedger {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(q, "ledger.db")+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return callLedger{db: db, table: func(n string) string { return n }}
}

// postgresCallLedger is ledgerBackend.open of PostgreSQL: a schema of the test's
// own, named by the tables and by --db's search_path.
func postgresCallLedger(t *testing.T, q string) callLedger {
	t.Helper()
	dsn, admin := postgresServer(t)
	schema := postgresSchema(t, admin)
	return callLedger{args: []string{"--db", withSearchPath(t, dsn, schema)}, db: admin,
		table: func(n string) string { return schema + "." + n }}
}

// mysqlCallLedger is ledgerBackend.open of MariaDB: a database of the test's own.
func mysqlCallLedger(t *testing.T, q string) callLedger {
	t.Helper()
	dsn, db := mysqlDatabase(t)
	return callLedger{args: []string{"--db", dsn}, db: db, table: func(n string) string { return n }}
}

// checkCallsSettled checks what every --post test ends with: each valid
// msg_id processed once, every redelivery a duplicate, nothing reserved
// or waiting, inbox/ and processing/ empty.
func checkCallsSettled(t *testing.T, q string, l callLedger, valid, redelivered int) {
	t.Helper()
	if n := l.count(t, "SELECT COUNT(*) FROM %[1]s"); n != valid {
		t.Errorf("processed rows: %d, want %d", n, valid)
	}
	if n := l.count(t, "SELECT COUNT(*) FROM %[2]s WHERE outcome = 'duplicate'"); n != redelivered {
		t.Errorf("duplicate records: %d, want %d", n, redelivered)
	}
	if n := l.count(t, "SELECT COUNT(*) FROM %[2]s WHERE outcome = 'dead-letter'"); n != 0 {
		t.Errorf("dead letters: %d, want none", n)
	}
	if n := l.count(t, "SELECT COUNT(*) FROM %[3]s"); n != 0 {
		t.Errorf("reservations left: %d, want none", n)
	}
	if n := l.count(t, "SELECT COUNT(*) FROM %[4]s"); n != 0 {
		t.Errorf("attempts left: %d, want none", n)
	}
	if n := countNames(t, q, inbox); n != 0 {
		t.Errorf("inbox/ holds %d messages, want none", n)
	}
	if n := countClaims(t, q); n != 0 {
		t.Errorf("processing/ holds %d claims, want none", n)
	}
	if n := countNames(t, q, done); n != valid+redelivered {
		t.Errorf("done/ holds %d messages, want %d", n, valid+redelivered)
	}
}

package postgres

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/internal/testenv"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/ledgertest"
)

// serverDSN returns the test server's DSN, skipping the test when there is
// none, except on CI, which must run these tests.
func serverDSN(t testing.TB) string {
	t.Helper()
	return testenv.Postgres(t)
}

// withParam returns dsn, a URL or a keyword/value string, with the
// parameter key set to value.
func withParam(t testing.TB, dsn, key, value string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		// libpq's URI rules: the last occurrence of a key wins, and only
		// %XX is decoded, so a space must be %20, not '+'.
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + key + "=" + strings.ReplaceAll(url.QueryEscape(value), "+", "%20")
	}
	quoted := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(value)
	return dsn + " " + key + "='" + quoted + "'"
}

// admin is a plain connection to the test server; closed by t.Cleanup.
func admin(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// freshSchema creates an empty schema for one test (ledgertest.Scratch)
// and returns a DSN whose search_path is that schema. The schema is
// dropped when the test ends.
func freshSchema(t testing.TB) string {
	t.Helper()
	return ledgertest.Scratch(t, serverDSN(t))
}

// openFresh opens a ledger in a fresh schema; the caller closes it.
func openFresh(t testing.TB) (*ledger.DB, string) {
	t.Helper()
	dsn := freshSchema(t)
	db, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return db, dsn
}

func TestConformance(t *testing.T) {
	serverDSN(t)
	t.Parallel()
	ledgertest.Run(t, ledgertest.Backend{
		Fresh: func(t *testing.T) string { return freshSchema(t) },
		ByteOrder: func(t *testing.T, db *ledger.DB) bool {
			var collation string
			if err := db.SQL().QueryRowContext(t.Context(),
				`SELECT datcollate FROM pg_database WHERE datname = current_database()`).Scan(&collation); err != nil {
				t.Fatal(err)
			}
			switch strings.ToLower(collation) {
			case "c", "posix", "c.utf-8", "c.utf8":
				return true
			}
			return false
		},
	})
}

func delivery(claim, msgID string) *spool.Delivery {
	raw := `{"msg_id":` + strconv.Quote(msgID) + `,"order_no":"A","seq":1,"amount":"1.00"}`
	return &spool.Delivery{
		Claim: claim, File: msgID + ".json", Ino: 1, Consumer: "test", Size: int64(len(raw)),
		Message: &spool.Message{MsgID: msgID, OrderNo: "A", Seq: 1, Amount: "1.00", Raw: []byte(raw)},
		At:      time.Now(),
	}
}

func countRows(t *testing.T, db *sql.DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(t.Context(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// TestSynchronousCommit: a session whose commits may return before they are
// on disk is refused (I3); the values that still flush locally are not.
func TestSynchronousCommit(t *testing.T) {
	t.Parallel()
	dsn := freshSchema(t)
	for _, tc := range []struct {
		value  string
		refuse bool
	}{
		{"off", true},
		{"local", false},
		{"remote_write", false},
		{"on", false},
	} {
		t.Run(tc.value, func(t *testing.T) {
			db, err := Open(t.Context(), withParam(t, dsn, "options", "-c synchronous_commit="+tc.value))
			if tc.refuse {
				if err == nil {
					db.Close()
					t.Fatal("Open: nil error, want a refusal")
				}
				if !errors.Is(err, ErrNotDurable) || !strings.Contains(err.Error(), "synchronous_commit is off") {
					t.Errorf("Open = %v, want ErrNotDurable naming synchronous_commit", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer db.Close()
			var got string
			if err := db.SQL().QueryRowContext(t.Context(), "SHOW synchronous_commit").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.value {
				t.Errorf("synchronous_commit = %q, want %q: the DSN's options did not reach the session", got, tc.value)
			}
		})
	}
}

// TestKeywordDSN: a keyword/value DSN works as the URL does, search_path
// included.
func TestKeywordDSN(t *testing.T) {
	t.Parallel()
	dsn := freshSchema(t)
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		dsn = keywordDSN(t, u)
	}
	db, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open(%q): %v", dsn, err)
	}
	defer db.Close()
	if _, err := db.Consumer().Record(t.Context(), []*spool.Delivery{delivery("c1", "m1")}, spool.Work{}); err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := db.SQL().QueryRowContext(t.Context(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(schema, "spool_scratch_") {
		t.Errorf("current_schema() = %q, want the test's spool_scratch_ schema", schema)
	}
	if n := countRows(t, db.SQL(), "SELECT COUNT(*) FROM "+schema+".processed"); n != 1 {
		t.Errorf("rows in %s.processed = %d, want 1", schema, n)
	}
}

// keywordDSN rewrites a postgres:// URL as keyword/value pairs.
func keywordDSN(t *testing.T, u *url.URL) string {
	t.Helper()
	var kv []string
	add := func(k, v string) {
		if v != "" {
			kv = append(kv, k+"='"+strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v)+"'")
		}
	}
	add("host", u.Hostname())
	add("port", u.Port())
	add("user", u.User.Username())
	pw, _ := u.User.Password()
	add("password", pw)
	add("dbname", strings.TrimPrefix(u.Path, "/"))
	q := u.Query()
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range q {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		add(k, q.Get(k))
	}
	return strings.Join(kv, " ")
}

// TestMissingSchema: a search_path naming no schema fails Open clearly
// instead of failing the first CREATE TABLE.
func TestMissingSchema(t *testing.T) {
	t.Parallel()
	dsn := withParam(t, serverDSN(t), "search_path", "spool_test_no_such_schema")
	db, err := Open(t.Context(), dsn)
	if err == nil {
		db.Close()
		t.Fatal("Open: nil error, want one")
	}
	if !strings.Contains(err.Error(), `search_path "spool_test_no_such_schema" names no existing schema`) || !errors.Is(err, ledger.ErrBadDSN) {
		t.Errorf("Open = %v, want ledger.ErrBadDSN naming the search_path", err)
	}
}

// TestPool: the pool is bounded, and every connection of it carries the
// DSN's settings, not only the first.
func TestPool(t *testing.T) {
	t.Parallel()
	db, _ := openFresh(t)
	defer db.Close()
	if got := db.SQL().Stats().MaxOpenConnections; got != maxConns {
		t.Errorf("max open connections = %d, want %d", got, maxConns)
	}
	var conns []*sql.Conn
	for range maxConns {
		c, err := db.SQL().Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	for i, c := range conns {
		var schema, app string
		if err := c.QueryRowContext(t.Context(), "SELECT current_schema(), current_setting('application_name')").Scan(&schema, &app); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(schema, "spool_scratch_") || app != "spool" {
			t.Errorf("connection %d: schema %q, application_name %q, want spool_scratch_..., spool", i, schema, app)
		}
	}
}

// TestBadDSN runs without a server: a DSN that does not parse fails Open
// without echoing the password.
func TestBadDSN(t *testing.T) {
	for _, dsn := range []string{
		"postgres://spool:s3cret@db.internal:notaport/queue",
		"host=db.internal password=s3cret port=notaport",
	} {
		db, err := Open(t.Context(), dsn)
		if err == nil {
			db.Close()
			t.Errorf("Open(%q): nil error, want one", dsn)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open error %q shows the password", err)
		}
	}
}

// TestSettingsCheck runs without a server: what check refuses.
func TestSettingsCheck(t *testing.T) {
	good := settings{synchronousCommit: "on", fsync: "on", version: 150020, schema: "public", searchPath: `"$user", public`}
	for _, tc := range []struct {
		name       string
		change     func(*settings)
		wantErr    string // empty: accepted
		notDurable bool   // the error is ErrNotDurable
	}{
		{"defaults", func(*settings) {}, "", false},
		{"synchronous_commit local", func(s *settings) { s.synchronousCommit = "local" }, "", false},
		{"synchronous_commit remote_apply", func(s *settings) { s.synchronousCommit = "remote_apply" }, "", false},
		{"synchronous_commit off", func(s *settings) { s.synchronousCommit = "off" }, "synchronous_commit is off", true},
		{"fsync off", func(s *settings) { s.fsync = "off" }, "fsync off", true},
		{"PostgreSQL 14", func(s *settings) { s.version = 140011 }, "PostgreSQL 15 or later", false},
		{"PostgreSQL 17", func(s *settings) { s.version = 170002 }, "", false},
		{"no schema", func(s *settings) { s.schema, s.searchPath = "", "nope" }, `search_path "nope" names no existing schema`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.change(&s)
			err := s.check()
			if tc.wantErr == "" {
				if err != nil {
					t.Errorf("check = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("check = %v, want an error containing %q", err, tc.wantErr)
			}
			if got := errors.Is(err, ErrNotDurable); got != tc.notDurable {
				t.Errorf("errors.Is(%v, ErrNotDurable) = %v, want %v", err, got, tc.notDurable)
			}
		})
	}
}

//go:build linux

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadyLedgerUnreachable: /readyz of consume --watch --listen on a
// PostgreSQL ledger fails while the server refuses the consumer's role
// (NOLOGIN, and its connections terminated: pg_terminate_backend alone
// would let the pool reconnect at once) and recovers when the role may log
// in again; the consumer itself keeps running and consumes after.
func TestReadyLedgerUnreachable(t *testing.T) {
	t.Parallel()
	dsn, admin := postgresServer(t)
	schema := postgresSchema(t, admin)
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	role := "spool_ready_" + hex.EncodeToString(rnd[:])
	for _, s := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT ALL ON SCHEMA " + schema + " TO " + role,
	} {
		if _, err := admin.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	terminate := func() {
		t.Helper()
		if _, err := admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, role); err != nil {
			t.Fatalf("terminate %s's connections: %v", role, err)
		}
	}
	t.Cleanup(func() {
		// Before the schema's own cleanup (registered earlier, run later).
		terminate()
		for _, s := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
			if _, err := admin.Exec(s); err != nil {
				t.Errorf("%s: %v", s, err)
			}
		}
	})
	u, err := url.Parse(withSearchPath(t, dsn, schema))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	db := u.String()

	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q, "--db", db)
	p, base := startListening(t, "consume", q, "--watch", "--db", db, "--listen", "127.0.0.1:0")
	waitStatus(t, base, "/readyz", 200)

	if _, err := admin.Exec("ALTER ROLE " + role + " NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	terminate()
	if body := waitStatus(t, base, "/readyz", 503); !strings.Contains(body, "ledger") {
		t.Errorf("/readyz with the ledger unreachable: %q, want the ledger named", body)
	}
	if code, _ := get(t, base, "/healthz"); code != 200 {
		t.Errorf("/healthz while the ledger is unreachable: %d, want 200 (the process is alive)", code)
	}
	if _, err := admin.Exec("ALTER ROLE " + role + " LOGIN"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, base, "/readyz", 200)

	putMessage(t, q, "m.json", metricsMessage("m", "1.00"))
	waitMetrics(t, base, []want{{"spool_deliveries_total", []string{"outcome", "processed"}, 1}})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := p.wait(t); r.code != 0 {
		t.Fatalf("consume after the ledger came back: want exit 0\n%s", r)
	}
}

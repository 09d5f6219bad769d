//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// metricsMessage is a valid message of the metrics workload.
func metricsMessage(id, amount string) string {
	return fmt.Sprintf(`{"msg_id":%q,"order_no":"o-%s","seq":1,"amount":%q}`, id, id, amount)
}

// orphanClaims leaves claims of a dead consumer in processing/: a consumer
// whose --exec handler hangs is killed while it holds them. It returns how
// many it left.
func orphanClaims(t *testing.T, q string) int {
	t.Helper()
	for i := range 2 {
		putMessage(t, q, fmt.Sprintf("r-%d.json", i), metricsMessage(fmt.Sprintf("r-%d", i), "1.00"))
	}
	p := start(t, "consume", q, "--exec", "sleep 10", "--batch", "1", "--concurrency", "1")
	waitFor(t, cmdTimeout, "a claim of the consumer to be killed", func() bool { return countClaims(t, q) > 0 })
	if !p.killAfter(t, 0) {
		t.Fatalf("the consumer exited before it was killed\n%s", p.result())
	}
	return countClaims(t, q)
}

// TestMetricsConsume: after a known workload (first deliveries, identical
// and conflicting redeliveries, dead letters of two reasons, claims of a
// killed consumer to recover), what consume --watch --listen serves at
// /metrics, parsed by Prometheus's text parser, agrees with the
// directories and the ledger; /healthz and /readyz answer 200.
func TestMetricsConsume(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	orphans := orphanClaims(t, q)
	const valid = 10
	for i := range valid {
		putMessage(t, q, fmt.Sprintf("v-%02d.json", i), metricsMessage(fmt.Sprintf("v-%02d", i), "1.00"))
	}
	putMessage(t, q, "p1.json", `{"msg_id":`)
	putMessage(t, q, "p2.json", `not json`)
	putMessage(t, q, "nokey.json", `{"order_no":"o-1","seq":1,"amount":"1.00"}`)

	p, base := startListening(t, "consume", q, "--watch", "--listen", "127.0.0.1:0", "--metrics-refresh", "100ms",
		"--exec", "cat >/dev/null", "--batch", "4")
	processed := valid + 2 // and the two messages of the killed consumer, recovered to inbox/
	waitFor(t, cmdTimeout, "the first wave in done/ and error/", func() bool {
		return countNames(t, q, done) == processed && countNames(t, q, errorStage) == 3
	})
	// Redeliveries: two identical, one with the same msg_id and another
	// amount (a conflict).
	putMessage(t, q, "again-0.json", metricsMessage("v-00", "1.00"))
	putMessage(t, q, "again-1.json", metricsMessage("v-01", "1.00"))
	putMessage(t, q, "changed.json", metricsMessage("v-02", "9.99"))
	waitFor(t, cmdTimeout, "the redeliveries in done/", func() bool { return countNames(t, q, done) == processed+3 })

	db := openLedger(t, q)
	ledgerSays := map[string]int{
		"processed":  count(t, db, `SELECT COUNT(*) FROM processed`),
		"duplicates": count(t, db, `SELECT COUNT(*) FROM deliveries WHERE outcome = 'duplicate'`),
		"conflicts":  count(t, db, `SELECT COUNT(*) FROM deliveries WHERE conflict = 1`),
		"parse":      count(t, db, `SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter' AND reason = 'parse'`),
		"missing":    count(t, db, `SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter' AND reason = 'missing-field'`),
	}
	if want := map[string]int{"processed": processed, "duplicates": 3, "conflicts": 1, "parse": 2, "missing": 1}; fmt.Sprint(ledgerSays) != fmt.Sprint(want) {
		t.Fatalf("the ledger holds %v, want %v: the workload is not what the test thinks", ledgerSays, want)
	}
	fs := waitMetrics(t, base, []want{
		{"spool_queue_messages", []string{"stage", "inbox"}, float64(countNames(t, q, inbox))},
		{"spool_queue_messages", []string{"stage", "processing"}, float64(countClaims(t, q))},
		{"spool_queue_messages", []string{"stage", "done"}, float64(countNames(t, q, done))},
		{"spool_queue_messages", []string{"stage", "error"}, float64(countNames(t, q, errorStage))},
		{"spool_queue_oldest_age_seconds", []string{"stage", "inbox"}, 0},
		{"spool_queue_oldest_age_seconds", []string{"stage", "processing"}, 0},
		{"spool_deliveries_total", []string{"outcome", "processed"}, float64(ledgerSays["processed"])},
		{"spool_deliveries_total", []string{"outcome", "duplicate"}, float64(ledgerSays["duplicates"])},
		{"spool_deliveries_total", []string{"outcome", "dead_letter"}, 3},
		{"spool_deliveries_total", []string{"outcome", "retry"}, 0},
		{"spool_dead_letters_total", []string{"reason", "parse"}, float64(ledgerSays["parse"])},
		{"spool_dead_letters_total", []string{"reason", "missing-field"}, float64(ledgerSays["missing"])},
		{"spool_conflicts_total", nil, float64(ledgerSays["conflicts"])},
		{"spool_recovered_claims_total", nil, float64(orphans)},
		// One exec call per first delivery, none for a duplicate.
		{"spool_handler_duration_seconds", []string{"kind", "exec", "result", "ok"}, float64(ledgerSays["processed"])},
	})
	if n, _ := fs.value("spool_ledger_commit_duration_seconds"); n < 1 {
		t.Errorf("spool_ledger_commit_duration_seconds counts %v commits, want some", n)
	}
	if ts, _ := fs.value("spool_last_commit_timestamp_seconds"); time.Since(time.Unix(int64(ts), 0)) > cmdTimeout {
		t.Errorf("spool_last_commit_timestamp_seconds = %v, want a time during this test", ts)
	}
	if age, ok := fs.value("spool_queue_oldest_age_seconds", "stage", "error"); !ok || age <= 0 {
		t.Errorf("error/ holds dead letters, but its oldest age is %v (present %v)", age, ok)
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if _, ok := fs[name]; !ok {
			t.Errorf("%s missing: the Go and process collectors are not served", name)
		}
	}
	if code, body := get(t, base, "/healthz"); code != 200 {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, base, "/readyz"); code != 200 {
		t.Errorf("/readyz: %d %q", code, body)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := p.wait(t); r.code != 0 {
		t.Fatalf("consume --listen after SIGTERM: want exit 0\n%s", r)
	}
}

// TestServeMetrics: spool serve shows a queue no consumer runs on: the
// backlog and the age of its oldest message, matching the directories,
// with the delivery counters at zero; /readyz fails while a stage is not a
// writable directory and recovers after. It refuses a queue without a
// ledger rather than create one.
func TestServeMetrics(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	q := filepath.Join(base, "q")
	mustRun(t, 0, "init", q)
	putMessage(t, q, "a.json", metricsMessage("a", "1.00"))
	mustRun(t, 0, "consume", q)
	putMessage(t, q, "bad.json", `nope`)
	mustRun(t, 0, "consume", q)
	for i := range 3 {
		name := fmt.Sprintf("w-%d.json", i)
		putMessage(t, q, name, metricsMessage(fmt.Sprintf("w-%d", i), "1.00"))
		setAge(t, q, name, time.Duration(i+1)*time.Hour)
	}
	ledger := filepath.Join(q, "ledger.db")
	before := queryLedger(t, ledger, `SELECT COUNT(*) FROM processed`)

	p, url := startListening(t, "serve", q, "--listen", "127.0.0.1:0", "--metrics-refresh", "100ms")
	fs := waitMetrics(t, url, []want{
		{"spool_queue_messages", []string{"stage", "inbox"}, 3},
		{"spool_queue_messages", []string{"stage", "processing"}, 0},
		{"spool_queue_messages", []string{"stage", "done"}, float64(countNames(t, q, done))},
		{"spool_queue_messages", []string{"stage", "error"}, float64(countNames(t, q, errorStage))},
		{"spool_deliveries_total", []string{"outcome", "processed"}, 0},
		{"spool_last_commit_timestamp_seconds", nil, 0},
	})
	if age, _ := fs.value("spool_queue_oldest_age_seconds", "stage", "inbox"); age < 3*3600 || age > 3*3600+600 {
		t.Errorf("spool_queue_oldest_age_seconds{stage=inbox} = %v, want about 3 hours (the oldest of 1, 2 and 3 h)", age)
	}
	if code, body := get(t, url, "/readyz"); code != 200 {
		t.Fatalf("/readyz of a sound queue: %d %q", code, body)
	}
	// A stage replaced by a file: no consumer could move a message there.
	errDir := filepath.Join(q, errorStage)
	if err := os.Rename(errDir, errDir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(errDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if body := waitStatus(t, url, "/readyz", 503); !strings.Contains(body, "stage error") {
		t.Errorf("/readyz with error/ a file: %q, want the stage named", body)
	}
	if code, _ := get(t, url, "/healthz"); code != 200 {
		t.Errorf("/healthz while not ready: %d, want 200 (the process is alive)", code)
	}
	if err := os.Remove(errDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(errDir+".away", errDir); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, url, "/readyz", 200)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := p.wait(t); r.code != 0 {
		t.Fatalf("serve after SIGTERM: want exit 0\n%s", r)
	}
	if after := queryLedger(t, ledger, `SELECT COUNT(*) FROM processed`); after != before || countNames(t, q, inbox) != 3 {
		t.Errorf("serve changed the queue: processed %d → %d rows, inbox/ %d messages", before, after, countNames(t, q, inbox))
	}

	// No ledger: refused, and none created.
	bare := filepath.Join(base, "bare")
	for _, s := range []string{inbox, processing, done, errorStage} {
		if err := os.MkdirAll(filepath.Join(bare, s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := run(t, "serve", bare, "--listen", "127.0.0.1:0")
	if r.code == 0 {
		t.Fatalf("serve of a queue without a ledger: want a refusal\n%s", r)
	}
	if _, err := os.Stat(filepath.Join(bare, "ledger.db")); !os.IsNotExist(err) {
		t.Errorf("serve created a ledger: %v", err)
	}
	if r := run(t, "serve", q); r.code != 2 {
		t.Errorf("serve without --listen: want exit 2\n%s", r)
	}
}

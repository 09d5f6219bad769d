//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClientLogsJSON: with --log-format json every line of stderr is one
// JSON object, also the lines the clients of Redis and MariaDB write of
// their own (go-redis's "failed to dial", the MySQL driver's "invalid
// connection" and "closing bad idle connection"): spool routes them into
// its logger, one line per distinct message every few seconds at most,
// the number held back said in the next. A consumer of a MariaDB ledger
// with a Redis dedup window runs through a Redis outage (its private
// redis-server killed) and the loss of its ledger connections (KILL
// CONNECTION from a second client: the machine's server is shared).
func TestClientLogsJSON(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	dsn, admin := mysqlDatabase(t)
	q, _ := workQueue(t)
	mustRun(t, 0, "init", q, "--db", dsn)
	p := start(t, "consume", q, "--watch", "--db", dsn, "--dedup", r.url(), "--log-format", "json", "--log-level", "info")
	files := 0
	put := func(n int) {
		for range n {
			id := fmt.Sprintf("m-%04d", files)
			putMessage(t, q, id+".json", orderMessage(id, "O", files+1, "1.00"))
			files++
		}
		waitFor(t, cmdTimeout, fmt.Sprintf("%d files in done/", files), func() bool { return countNames(t, q, done) == files })
	}
	killLedgerConns := func() int {
		t.Helper()
		rows, err := admin.Query(`SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> CONNECTION_ID()`)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			_, _ = admin.Exec(fmt.Sprintf("KILL CONNECTION %d", id)) // one may have ended meanwhile
		}
		return len(ids)
	}

	put(20)
	r.kill()
	// Each pass tries Redis again: several passes in the outage.
	for range 5 {
		put(10)
		time.Sleep(300 * time.Millisecond)
	}
	if killLedgerConns() == 0 {
		t.Fatal("the consumer holds no connection to its ledger's database")
	}
	put(10)
	killLedgerConns()
	put(10)
	r.start()
	put(10)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	res := p.wait(t)
	if res.code != 0 {
		t.Fatalf("consume exited %d\n%s", res.code, res)
	}

	var clients []string
	last := map[string]time.Time{}
	stopping := false // past the signal's record: the lines still held back are said once more at the end
	for i, line := range strings.Split(strings.TrimSuffix(res.stderr, "\n"), "\n") {
		var rec struct {
			Time       time.Time `json:"time"`
			Msg        string    `json:"msg"`
			Client     string    `json:"client"`
			Suppressed int       `json:"suppressed"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("stderr line %d is not JSON: %v\n%s", i+1, err, line)
			continue
		}
		if strings.HasPrefix(rec.Msg, "signal: stopping") {
			stopping = true
		}
		if rec.Client == "" {
			continue
		}
		clients = append(clients, rec.Client+": "+rec.Msg)
		key := rec.Client + " " + strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return -1
			}
			return r
		}, rec.Msg)
		if at, ok := last[key]; ok && rec.Time.Sub(at) < 4*time.Second && !(stopping && rec.Suppressed > 0) {
			t.Errorf("%s logged again %v after the last: want one line every few seconds at most", key, rec.Time.Sub(at))
		}
		last[key] = rec.Time
	}
	if len(clients) == 0 {
		t.Errorf("no line of the clients' own on stderr: the outage and the killed connections went unsaid\n%s", res.stderr)
	}
	t.Logf("the clients' lines: %q", clients)
}

//go:build linux

package e2e

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// TestBatchCrash kills consumers with SIGKILL in the middle of a JSON
// Lines file of 50 000 records, a few times, then lets one run finish:
// every record is processed exactly once (one processed row per key, no
// duplicate recorded: a resumed run starts after the last record
// committed), nothing is left in processing/, the file is in done/, and
// fsck finds nothing wrong.
func TestBatchCrash(t *testing.T) {
	batchCrash(t, 50_000, 4)
}

// TestBatchCrashLong is TestBatchCrash on a file of 400 000 records, with
// more kills.
func TestBatchCrashLong(t *testing.T) {
	testenv.Long(t, "kills consumers in the middle of a JSON Lines file of 400 000 records")
	batchCrash(t, 400_000, 12)
}

func batchCrash(t *testing.T, records, minKills int) {
	rng := newRand(t)
	q := batchQueue(t, `{"format": "jsonl"}`)
	var b bytes.Buffer
	for i := 1; i <= records; i++ {
		fmt.Fprintf(&b, `{"msg_id":"k%d","order_no":"o%d","seq":%d,"amount":"%d.00"}`+"\n", i, i%100, i, i)
	}
	putBytes(t, q, "feed.jsonl", b.Bytes())
	db := filepath.Join(q, "ledger.db")
	kills, before := 0, 0
	for run := 0; kills < minKills; run++ {
		if run > 20*minKills {
			t.Fatalf("%d runs and only %d kills in the middle of the file", run, kills)
		}
		p := start(t, "consume", q, "--batch", strconv.Itoa(1+rng.IntN(200)))
		// Kill a random moment after the run has committed records of its
		// own: in the middle of the file, whatever the machine's speed.
		progressed := false
		for !progressed {
			select {
			case <-p.done:
			default:
				if n, ok := ledgerProcessed(db); ok && n > before {
					progressed = true
					continue
				}
				time.Sleep(time.Millisecond) // poll interval, not a wait for a result
				continue
			}
			break
		}
		if !progressed || !p.killAfter(t, logDelay(rng, 100*time.Microsecond, 200*time.Millisecond)) {
			if r := p.result(); r.code != 0 {
				t.Fatalf("consumer exited by itself with a failure:\n%s", r)
			}
			break // it finished the file before the kill: too fast a machine for more
		}
		kills++
		n, _ := ledgerProcessed(db)
		if n >= records {
			break
		}
		before = n
		// The batch file is claimed whole: it is in inbox/ or in one claim.
		if in, claims := countNames(t, q, inbox)+countNamesLike(t, q, inbox, ".jsonl"), liveClaims(q); in+claims < 1 {
			t.Fatalf("after kill %d the batch file is neither in inbox/ nor claimed", kills)
		}
	}
	t.Logf("%d kills in the middle of the file", kills)
	r := mustRun(t, 0, "consume", q)
	st := parseStats(t, r)
	if st.Duplicates != 0 || st.DeadLetters != 0 {
		t.Fatalf("the last run: %+v, want no duplicate and no dead letter", st)
	}
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM processed`); n != records {
		t.Fatalf("%d processed rows, want %d", n, records)
	}
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM deliveries WHERE outcome <> 'processed'`); n != 0 {
		t.Fatalf("%d duplicate or dead-letter deliveries: a record was recorded twice", n)
	}
	if n := queryLedger(t, db, `SELECT COUNT(DISTINCT claim) FROM processed`); n != records {
		t.Fatalf("%d record claims for %d records", n, records)
	}
	if got := stageNames(t, q, done); !slices.Equal(got, []string{"feed.jsonl"}) {
		t.Fatalf("done/ holds %q", got)
	}
	if got := stageNames(t, q, processing); len(got) != 0 {
		t.Fatalf("processing/ holds %q", got)
	}
	if got := stageNames(t, q, inbox); len(got) != 0 {
		t.Fatalf("inbox/ holds %q", got)
	}
	checkFsck(t, q)
}

// ledgerProcessed counts the processed rows of the SQLite ledger at path
// while consumers write it; false while it cannot be read (not made yet).
func ledgerProcessed(path string) (int, bool) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return 0, false
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM processed`).Scan(&n); err != nil {
		return 0, false
	}
	return n, true
}

// countNamesLike counts the names of a stage ending in ext.
func countNamesLike(t *testing.T, q, stage, ext string) int {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(q, stage))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, de := range des {
		if filepath.Ext(de.Name()) == ext {
			n++
		}
	}
	return n
}

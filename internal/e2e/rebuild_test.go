//go:build linux

package e2e

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rebuildQueue is a queue whose n messages were consumed, whose ledger was
// then deleted, and into whose inbox/ the first of every n/10 messages was
// delivered again: 10 redeliveries that a half-built ledger would take
// for new messages.
func rebuildQueue(t *testing.T, n int) (q, path string) {
	t.Helper()
	q = filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	putMessages(t, q, 0, n, 0)
	requireStats(t, "first consume", mustRun(t, 0, "consume", q), consumeStats{Processed: n})
	path = filepath.Join(q, "ledger.db")
	removeLedgerFiles(t, path)
	for i := 0; i < n; i += n / 10 {
		putMessage(t, q, fmt.Sprintf("again%05d.json", i), orderMessage(fmt.Sprintf("m-%05d", i), fmt.Sprintf("o-%05d", i), 1, "1.00"))
	}
	return q, path
}

// rebuiltRows is how many processed rows the SQLite ledger at path holds,
// or -1 while it cannot be read yet (not created, not migrated).
func rebuiltRows(path string) int {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(1000)")
	if err != nil {
		return -1
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM processed`).Scan(&n); err != nil {
		return -1
	}
	return n
}

// repairHalfWay starts spool fsck --repair on q and stops it (SIGSTOP)
// once the ledger at path holds some of its rows and not all: the instant
// a consumer must not adopt it. It returns false when the repair finished
// before it could be caught.
func repairHalfWay(t *testing.T, q, path string, n int) (*proc, bool) {
	t.Helper()
	p := start(t, "fsck", q, "--repair")
	for {
		select {
		case <-p.done:
			return p, false
		default:
		}
		if rows := rebuiltRows(path); rows > 0 && rows < n {
			if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			if rows := rebuiltRows(path); rows >= n {
				// Stopped just after its last row: too late to tell.
				_ = p.cmd.Process.Signal(syscall.SIGCONT)
				<-p.done
				return p, false
			}
			return p, true
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// requireRebuildRefusal checks that a command refused the half-built
// ledger: exit 2, and one line that says so and names fsck --repair.
func requireRebuildRefusal(t *testing.T, q, what string, r result) {
	t.Helper()
	if r.code != 2 {
		t.Fatalf("%s on a ledger being rebuilt: exit %d, want 2 (refused)\n%s", what, r.code, r)
	}
	ls := notLogged(r.stderr)
	if len(ls) != 1 || !strings.Contains(ls[0], "being rebuilt") || !strings.Contains(ls[0], "Try:") || !strings.Contains(ls[0], "fsck "+q+" --repair") {
		t.Errorf("%s's refusal is not one line saying the ledger is being rebuilt with a Try: naming fsck --repair:\n%s", what, r)
	}
	if strings.Contains(r.stdout, "processed=") {
		t.Errorf("%s consumed while refusing:\n%s", what, r)
	}
}

// halfBuilt sets up a queue whose ledger is being rebuilt by a repair
// stopped half-way, growing the queue until a repair can be caught.
func halfBuilt(t *testing.T) (q, path string, p *proc) {
	t.Helper()
	for n := 1000; n <= 32000; n *= 2 { // from 4 of the repair's batches of 256 rows
		q, path = rebuildQueue(t, n)
		var caught bool
		if p, caught = repairHalfWay(t, q, path, n); caught {
			return q, path, p
		}
		t.Logf("the repair of %d files finished before it could be stopped half-way; trying a larger queue", n)
	}
	t.Fatal("no repair could be stopped half-way")
	return
}

// TestConsumeDuringRebuild: a consumer started while spool fsck --repair
// rebuilds a deleted ledger never processes a redelivery a second time:
// while the ledger is half-built every command refuses it (exit 2, one
// line with a Try:), and once the repair is complete the redeliveries are
// duplicates.
func TestConsumeDuringRebuild(t *testing.T) {
	t.Parallel()
	q, _, p := halfBuilt(t)
	requireRebuildRefusal(t, q, "consume", run(t, "consume", q))
	requireRebuildRefusal(t, q, "status", run(t, "status", q))
	requireRebuildRefusal(t, q, "dups", run(t, "dups", q))
	if rep := fsck(t, 1, q); !strings.Contains(fmt.Sprint(rep.kinds()), "rebuilding") {
		t.Errorf("fsck of a ledger being rebuilt does not report it: %v", rep.kinds())
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Consumers started as the repair goes on and ends: each refuses, or
	// finds every redelivery a duplicate.
	processed := 0
	for {
		select {
		case <-p.done:
		default:
			r := run(t, "consume", q)
			if r.code == 0 {
				processed += parseStats(t, r).Processed
			} else {
				requireRebuildRefusal(t, q, "consume", r)
			}
			continue
		}
		break
	}
	if r := p.result(); r.code != 0 {
		t.Fatalf("the repair failed:\n%s", r)
	}
	r := mustRun(t, 0, "consume", q)
	processed += parseStats(t, r).Processed
	if processed != 0 {
		t.Errorf("consumers started during the rebuild processed %d redeliveries again", processed)
	}
	requireFindings(t, "fsck after the rebuild", fsck(t, 0, q), nil)
}

// TestRebuildKilled: a repair killed half-way through rebuilding a deleted
// ledger leaves it refused by the next consume until spool fsck --repair
// is run again, which finishes the rebuild; the redeliveries are then
// duplicates.
func TestRebuildKilled(t *testing.T) {
	t.Parallel()
	q, path, p := halfBuilt(t)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	rows := rebuiltRows(path)
	requireRebuildRefusal(t, q, "consume after the killed repair", run(t, "consume", q))
	if rebuiltRows(path) != rows {
		t.Errorf("the refused consume changed the ledger")
	}
	out := repairThenClean(t, q, nil)
	if countContains(out, "resuming the rebuild") != 1 || countContains(out, "rebuilt the ledger") != 1 {
		t.Errorf("the second repair does not say it resumed and completed the rebuild:\n%s", strings.Join(out, "\n"))
	}
	r := mustRun(t, 0, "consume", q)
	if st := parseStats(t, r); st.Processed != 0 || st.Duplicates != 10 {
		t.Errorf("after the rebuild the 10 redeliveries gave %+v, want 10 duplicates and nothing processed", st)
	}
}

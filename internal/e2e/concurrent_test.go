//go:build linux

package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// TestConcurrentConsumers starts four consumers at once on one queue (I6):
// they race for every claim, and for the ledger's creation too. Each
// message must be consumed exactly once: one delivery per file.
//
// It runs on the queue's SQLite ledger and, with SPOOL_TEST_MYSQL, on a
// MariaDB one.
func TestConcurrentConsumers(t *testing.T) {
	// Not parallel with the other tests (its engines are, with each
	// other): its kills are timed against the consumers' work, which a
	// machine busy with the whole package slows past them.
	for _, engine := range []ledgerBackend{sqliteEngine, mysqlEngine} {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			testConcurrentConsumers(t, engine)
		})
	}
}

func testConcurrentConsumers(t *testing.T, engine ledgerBackend) {
	rng := newRand(t)
	c := genCorpus(rng, genOptions{Total: testenv.Pick(2500, 600), Hostile: true})
	q := newQueue(t, c)
	l := engine.crash(t, q)

	var ps []*proc
	for i := range 4 {
		ps = append(ps, start(t, append([]string{"consume", q, "--batch", strconv.Itoa([]int{1, 8, 32, 256}[i])}, l.args...)...))
	}
	var sum consumeStats
	for _, p := range ps {
		r := p.wait(t)
		if r.code != 0 {
			t.Fatalf("a concurrent consumer failed:\n%s", r)
		}
		st := parseStats(t, r)
		sum.Processed += st.Processed
		sum.Duplicates += st.Duplicates
		sum.DeadLetters += st.DeadLetters
		sum.Recovered += st.Recovered
	}
	want := consumeStats{
		Processed:   len(c.valid),
		Duplicates:  c.redeliveries(),
		DeadLetters: c.count(errorStage),
	}
	if sum != want {
		t.Errorf("the consumers' summaries add up to %+v, want %+v", sum, want)
	}
	checkFinalOn(t, q, c, l)
}

// TestCrashWhileConcurrent runs two consumers that drain the queue while a
// third is started and SIGKILLed again and again beside them: its orphaned
// claims must be recovered by the survivors or by the final clean run.
//
// It runs on the queue's SQLite ledger and, with SPOOL_TEST_MYSQL, on a
// MariaDB one.
func TestCrashWhileConcurrent(t *testing.T) {
	// Not parallel with the other tests (its engines are, with each
	// other): its kills are timed against the consumers' work, which a
	// machine busy with the whole package slows past them.
	for _, engine := range []ledgerBackend{sqliteEngine, mysqlEngine} {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			testCrashWhileConcurrent(t, engine)
		})
	}
}

func testCrashWhileConcurrent(t *testing.T, engine ledgerBackend) {
	rng := newRand(t)
	c := genCorpus(rng, genOptions{Total: testenv.Pick(2000, 500), Hostile: true})
	q := newQueue(t, c)
	l := engine.crash(t, q)
	consume := func(args ...string) []string { return append(append([]string{"consume", q}, args...), l.args...) }

	steady := []*proc{
		start(t, consume("--batch", "4")...),
		start(t, consume("--batch", "16")...),
	}
	kills := 0
	for run, running := 0, true; (running || kills < 3) && run < 500; run++ {
		p := start(t, consume("--batch", strconv.Itoa(1+rng.IntN(64)))...)
		if p.killAfter(t, logDelay(rng, 2*time.Millisecond, 200*time.Millisecond)) {
			kills++
		} else if r := p.result(); r.code != 0 {
			t.Fatalf("consumer exited by itself with a failure:\n%s", r)
		}
		running = false
		for _, s := range steady {
			select {
			case <-s.done:
			default:
				running = true
			}
		}
	}
	for _, s := range steady {
		if r := s.wait(t); r.code != 0 {
			t.Fatalf("a steady consumer failed:\n%s", r)
		}
	}
	t.Logf("%d kills of a live consumer beside the steady ones", kills)
	if kills < 3 {
		t.Errorf("only %d kills hit a live consumer", kills)
	}
	mustRun(t, 0, consume()...)
	checkFinalOn(t, q, c, l)
}

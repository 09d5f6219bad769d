//go:build linux

package e2e

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// newRand returns a seeded generator, logging the seed; SPOOL_E2E_SEED
// replays a failing run.
func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SPOOL_E2E_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SPOOL_E2E_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (SPOOL_E2E_SEED=%d to replay)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x5eed))
}

// newQueue initialises an empty queue with spool init and fills its inbox
// with a generated corpus.
func newQueue(t *testing.T, c *corpus) string {
	t.Helper()
	base := t.TempDir()
	q := filepath.Join(base, "q")
	outside := filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, 0, "init", q)
	c.write(t, filepath.Join(q, inbox), outside)
	return q
}

// logDelay draws a delay log-uniformly in [lo, hi]: many short ones that
// hit start-up and the first claims, some long ones that hit the middle of
// batches.
func logDelay(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	f := math.Log(float64(lo)) + rng.Float64()*(math.Log(float64(hi))-math.Log(float64(lo)))
	return time.Duration(math.Exp(f))
}

// killLoop starts consumers on q one after another and SIGKILLs each, until
// at least minKills kills hit a live consumer and inbox/ is drained (or the
// budget runs out: the clean run that follows drains the rest). A third of
// the kills come after a blind random delay, which hits start-up, recovery
// and work alike; the others come a random moment after the first sign of
// work (a claim in processing/, a file finished), which hits claims in
// flight however fast or slow the machine is. Once there were minKills,
// the runs last longer so that inbox/ drains; but until minOrphaning kills
// also left claims behind, they stay aimed kills, short after the first
// sign of work: a loaded machine's blind kills may all hit start-ups, and
// a fast one may drain inbox/ first, which late redeliveries then fill
// again. It checks
// after each kill that no message was lost or duplicated so far, and
// returns how many kills hit a live process and how many of those left
// claims behind.
func killLoop(t *testing.T, rng *rand.Rand, q string, c *corpus, minKills, minOrphaning int, budget time.Duration, dbArgs ...string) (kills, orphaning int) {
	t.Helper()
	deadline := time.Now().Add(budget)
	maxDelay := 300 * time.Millisecond // of a blind kill
	maxExtra := 30 * time.Millisecond  // of a kill after the first sign of work
	late := 0
	for run := 0; ; run++ {
		remaining := countNames(t, q, inbox) + countClaims(t, q)
		if remaining == 0 && kills >= minKills && orphaning < minOrphaning && time.Now().Before(deadline) {
			// The inbox drained before kills enough hit claims in flight
			// (a fast machine, the quick size): a late producer delivers
			// processed messages again, so that the kills to come have
			// work to hit.
			late += c.redeliverLate(t, rng, q, 50)
			remaining = countNames(t, q, inbox)
		}
		if kills >= minKills && (remaining == 0 || time.Now().After(deadline)) {
			t.Logf("%d runs, %d kills of a live consumer, %d left claims behind, %d late redeliveries; %d messages left for the clean run",
				run, kills, orphaning, late, remaining)
			return kills, orphaning
		}
		if run > 40*minKills {
			t.Fatalf("%d runs and only %d kills hit a live consumer", run, kills)
		}
		batch := 1 + rng.IntN(64)
		args := append([]string{"consume", q, "--batch", strconv.Itoa(batch)}, dbArgs...)
		if rng.IntN(3) == 0 {
			args = append(args, "--workers", strconv.Itoa(1+rng.IntN(4)))
		}
		finished := countNames(t, q, done) + countNames(t, q, errorStage)
		p := start(t, args...)
		enough := kills >= minKills && orphaning >= minOrphaning
		blind := remaining == 0 || rng.IntN(3) == 0 && (kills < minKills || enough)
		var delay time.Duration
		alive := false
		if blind {
			delay = logDelay(rng, time.Millisecond, maxDelay)
			alive = p.killAfter(t, delay)
		} else if waitForWork(t, p, q, finished) {
			delay = logDelay(rng, 50*time.Microsecond, maxExtra)
			alive = p.killAfter(t, delay)
		}
		if !alive {
			// It finished before the kill: a drain must then succeed.
			if r := p.result(); r.code != 0 {
				t.Fatalf("consumer exited by itself with a failure:\n%s", r)
			}
			if blind {
				maxDelay = max(10*time.Millisecond, maxDelay/2)
			} else {
				maxExtra = max(time.Millisecond, maxExtra/2)
			}
			continue
		}
		kills++
		claims := countClaims(t, q)
		if claims > 0 {
			orphaning++
		}
		// After any kill, every delivery is still somewhere, exactly once.
		n := countNames(t, q, inbox) + claims + countNames(t, q, done) + countNames(t, q, errorStage)
		if n != len(c.files) {
			t.Fatalf("after kill %d (batch %d, %v): the stages hold %d messages, %d were delivered", kills, batch, delay, n, len(c.files))
		}
		// Now and then, while consumers come and go, a producer delivers
		// again messages that were processed already, under their names.
		if kills%6 == 0 {
			late += c.redeliverLate(t, rng, q, 10)
		}
		// Keep kills coming while there is work: if the inbox would drain
		// in fewer runs than kills still wanted, kill sooner; if a blind
		// kill came before the consumer did anything (a slow start on a
		// loaded machine), kill later; once there were kills enough, let
		// the runs last longer so that the inbox drains.
		after := countNames(t, q, inbox) + claims
		switch progress := remaining - after; {
		case kills >= minKills && orphaning >= minOrphaning:
			// Enough kills: let the runs drain what is left.
			maxDelay = min(3*time.Second, maxDelay*2)
			maxExtra = min(time.Second, maxExtra*2)
		case progress > 0 && after/progress < minKills-kills:
			maxDelay = max(10*time.Millisecond, maxDelay*3/4)
			maxExtra = max(time.Millisecond, maxExtra*3/4)
		case blind && progress == 0 && claims == 0 && remaining > 0:
			maxDelay = min(3*time.Second, maxDelay*3/2)
		}
	}
}

// waitForWork polls until the consumer p has claimed something or finished
// a file beyond the finished ones, and reports false if p exits first.
func waitForWork(t *testing.T, p *proc, q string, finished int) bool {
	t.Helper()
	exited := false
	worked := poll(cmdTimeout, 200*time.Microsecond, func() bool {
		select {
		case <-p.done:
			exited = true
			return true
		default:
		}
		return liveClaims(q) > 0 || countNames(t, q, done)+countNames(t, q, errorStage) > finished
	})
	if !worked {
		t.Fatalf("consumer %q did no work within %v", p.cmd.Args[1:], cmdTimeout)
	}
	return !exited
}

// liveClaims counts the claims in processing/ while consumers run: entries
// come and go, so errors mean "gone" and are not failures.
func liveClaims(q string) int {
	dir := filepath.Join(q, processing)
	des, _ := os.ReadDir(dir)
	n := 0
	for _, de := range des {
		if !de.IsDir() || isMessageName(de.Name()) {
			n++
			continue
		}
		in, _ := os.ReadDir(filepath.Join(dir, de.Name()))
		n += countSessionClaims(in)
	}
	return n
}

// TestCrashInjection kills consumers with SIGKILL at random instants while
// they drain a queue of thousands of messages, then checks that one clean
// run restores every invariant (I7) and that no message was counted as a
// duplicate of its own interrupted processing.
//
// It runs on the queue's SQLite ledger and, with SPOOL_TEST_MYSQL, on a
// MariaDB one.
func TestCrashInjection(t *testing.T) {
	// Not parallel with the other tests (its engines are, with each
	// other): its kills are timed against the consumers' work, which a
	// machine busy with the whole package slows past them.
	for _, engine := range []ledgerBackend{sqliteEngine, mysqlEngine} {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			testCrashInjection(t, engine)
		})
	}
}

func testCrashInjection(t *testing.T, engine ledgerBackend) {
	rng := newRand(t)
	c := genCorpus(rng, genOptions{Total: testenv.Pick(3000, 600), Hostile: true})
	q := newQueue(t, c)
	l := engine.crash(t, q)

	kills, orphaning := killLoop(t, rng, q, c, 30, 5, time.Duration(testenv.Pick(60, 25))*time.Second, l.args...)
	if kills < 20 {
		t.Fatalf("only %d kills hit a live consumer, want at least 20", kills)
	}
	if orphaning < 5 {
		t.Errorf("only %d kills left claims behind in processing/: the kills missed the consumers' work", orphaning)
	}

	// lag counts the claims a dead consumer left, inside its directory.
	orphans := countClaims(t, q)
	r := mustRun(t, 0, "lag", q, strconv.Itoa(len(c.files)))
	if want := fmt.Sprintf("inbox=%d processing=%d error=%d\n", countNames(t, q, inbox), orphans, countNames(t, q, errorStage)); r.stdout != want {
		t.Errorf("lag after the kills: got %q, want %q", r.stdout, want)
	}
	r = mustRun(t, 0, append([]string{"consume", q}, l.args...)...)
	st := parseStats(t, r)
	if st.Recovered != orphans {
		t.Errorf("clean run recovered=%d, but %d claims were left in processing/", st.Recovered, orphans)
	}
	checkFinalOn(t, q, c, l)
}

//go:build linux

package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// TestPostConcurrentOnePerKey runs four consumers with --post and
// --concurrency on one ledger, against a server that answers after 20 ms.
// A tenth of the messages are delivered twice: half of the second copies
// are there from the start, half are put into inbox/ by the server while
// the first copy's request is in flight. Every msg_id must be processed
// once and reach the server once: the reservation keeps a second delivery
// from being called while the first is in flight, and makes it a duplicate
// once the first is committed.
func TestPostConcurrentOnePerKey(t *testing.T) {
	t.Parallel()
	for _, engine := range []ledgerBackend{sqliteEngine, postgresEngine, mysqlEngine} {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			q, _ := workQueue(t)
			l := engine.open(t, q)
			n := testenv.Pick(600, 200)
			body := func(i int) string { return orderMessage(fmt.Sprintf("m%05d", i), "A", i+1, "1.00") }
			srv := newCallServer(t, 20*time.Millisecond)
			// Set under the lock: the server's goroutines read it, and the
			// consumer processes in between give the race detector no order.
			srv.mu.Lock()
			srv.onFirst = func(key string) error {
				i, err := strconv.Atoi(strings.TrimPrefix(key, "m"))
				if err != nil || i%20 != 10 {
					return err
				}
				return deliver(q, fmt.Sprintf("m%05d-again.json", i), body(i))
			}
			srv.mu.Unlock()
			redelivered := 0
			for i := range n {
				putMessage(t, q, fmt.Sprintf("m%05d.json", i), body(i))
				if i%20 == 0 {
					putMessage(t, q, fmt.Sprintf("m%05d-resent.json", i), body(i))
				}
				if i%10 == 0 {
					redelivered++
				}
			}
			var ps []*proc
			for range 4 {
				args := append([]string{"consume", q, "--post", srv.URL, "--concurrency", "8", "--batch", "16"}, l.args...)
				ps = append(ps, start(t, args...))
			}
			var sum consumeStats
			for _, p := range ps {
				r := p.wait(t)
				if r.code != 0 {
					t.Fatalf("a consumer failed:\n%s", r)
				}
				st := parseStats(t, r)
				sum.Processed += st.Processed
				sum.Duplicates += st.Duplicates
			}
			// A second copy put in while its first was in flight may have
			// arrived after every consumer's last pass: a last drain.
			r := mustRun(t, 0, append([]string{"consume", q, "--post", srv.URL}, l.args...)...)
			last := parseStats(t, r)
			sum.Processed += last.Processed
			sum.Duplicates += last.Duplicates
			if sum.Processed != n || sum.Duplicates != redelivered {
				t.Errorf("consumers processed %d and found %d duplicates, want %d and %d", sum.Processed, sum.Duplicates, n, redelivered)
			}
			seen, maxInFlight := srv.seen(t)
			if len(seen) != n {
				t.Errorf("the server saw %d keys, want %d", len(seen), n)
			}
			for k, c := range seen {
				if c != 1 {
					t.Errorf("the server saw key %s %d times, want once", k, c)
				}
			}
			t.Logf("at most %d requests in flight at once", maxInFlight)
			if maxInFlight < 2 {
				t.Errorf("never more than %d request in flight: the calls were not concurrent", maxInFlight)
			}
			checkCallsSettled(t, q, l, n, redelivered)
		})
	}
}

// TestPostCrash kills consumers with SIGKILL at random instants while two
// of them post concurrently, again and again, then runs a clean drain.
// Every valid msg_id must end with one processed row and have reached the
// server; a key may reach it again only when a kill hit while its first
// call was in flight or not yet committed, at most --concurrency keys per
// kill.
//
// It runs on the queue's SQLite ledger and, with SPOOL_TEST_MYSQL, on a
// MariaDB one, whose transactions run side by side.
func TestPostCrash(t *testing.T) {
	// Not parallel with the other tests (its engines are, with each
	// other): its kills are timed against the consumers' work, which a
	// machine busy with the whole package slows past them.
	for _, engine := range []ledgerBackend{sqliteEngine, mysqlEngine} {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			testPostCrash(t, engine)
		})
	}
}

func testPostCrash(t *testing.T, engine ledgerBackend) {
	const conc = 8
	rng := newRand(t)
	q, _ := workQueue(t)
	l := engine.open(t, q)
	n, redelivered := 0, 0
	// deliver puts count more messages into inbox/, a tenth of them twice.
	deliver := func(count int) {
		for i := n; i < n+count; i++ {
			b := orderMessage(fmt.Sprintf("m%05d", i), "A", i+1, "1.00")
			putMessage(t, q, fmt.Sprintf("m%05d.json", i), b)
			if i%10 == 0 {
				putMessage(t, q, fmt.Sprintf("m%05d-resent.json", i), b)
				redelivered++
			}
		}
		n += count
	}
	deliver(testenv.Pick(3000, 1000))
	srv := newCallServer(t, 10*time.Millisecond)
	// A restart holds the msg_ids a killed consumer had in flight for the
	// post timeout: a short one keeps the rounds short.
	args := append([]string{"consume", q, "--post", srv.URL, "--concurrency", strconv.Itoa(conc), "--post-timeout", "2s"}, l.args...)
	// A kill is not an instant: from the signal sent to the process reaped,
	// the dying consumer may still have a request in its socket, which the
	// server begins after the signal and may answer before it notices the
	// client gone.
	type kill struct{ sent, reaped time.Time }
	var kills []kill
	minKills := testenv.Pick(20, 8)
	for round := 0; len(kills) < minKills && round < 200; round++ {
		if countNames(t, q, inbox) == 0 {
			// Drained before the kills were enough (a fast machine, or
			// kills that came late): more work for the next consumers.
			deliver(500)
		}
		ps := []*proc{start(t, args...), start(t, args...)}
		for _, p := range ps {
			select {
			case <-p.done:
				if r := p.result(); r.code != 0 {
					t.Fatalf("a consumer failed by itself:\n%s", r)
				}
				continue
			case <-time.After(logDelay(rng, 5*time.Millisecond, 300*time.Millisecond)):
			}
			at := time.Now()
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
			if p.killed {
				kills = append(kills, kill{sent: at, reaped: time.Now()})
			} else if r := p.result(); r.code != 0 {
				t.Fatalf("a consumer failed by itself:\n%s", r)
			}
		}
	}
	t.Logf("%d kills of a live consumer", len(kills))
	if len(kills) < minKills {
		t.Errorf("only %d kills hit a live consumer, want %d", len(kills), minKills)
	}
	mustRun(t, 0, args...)

	srv.mu.Lock()
	starts, gone := srv.starts, srv.gone
	srv.mu.Unlock()
	again := 0
	for i := range n {
		key := fmt.Sprintf("m%05d", i)
		ts := starts[key]
		if len(ts) == 0 {
			t.Errorf("the server never saw key %s", key)
			continue
		}
		again += len(ts) - 1
		// Each call after the first must follow a kill that hit the call
		// before it: one whose client went away unanswered (the server
		// may have begun it only after the kill), or one begun before the
		// dying process was reaped and made again after the signal, its
		// outcome not committed. Only a kill leaves a call to be made
		// again.
		for j := 1; j < len(ts); j++ {
			straddled := gone[key][j-1]
			for _, k := range kills {
				if ts[j-1].Before(k.reaped) && k.sent.Before(ts[j]) {
					straddled = true
				}
			}
			if !straddled {
				t.Errorf("key %s was called again at %v without a kill since its call at %v", key, ts[j], ts[j-1])
			}
		}
	}
	t.Logf("%d calls made again after %d kills", again, len(kills))
	if again > conc*len(kills) {
		t.Errorf("%d calls made again after %d kills, want at most %d per kill", again, len(kills), conc)
	}
	checkCallsSettled(t, q, l, n, redelivered)
}

// TestBenchHandlerProcesses: bench --handler --procs runs real consumer
// processes on one ledger, and their outcome counts add up exactly.
func TestBenchHandlerProcesses(t *testing.T) {
	t.Parallel()
	for _, engine := range []ledgerBackend{sqliteEngine, postgresEngine} {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			args := []string{"bench", "--handler", "post", "--procs", "3", "--n", "300",
				"--latency", "2ms", "--concurrency", "4", "--tmp", t.TempDir()}
			args = append(args, engine.db(t)...)
			r := mustRun(t, 0, args...)
			for _, want := range []string{"processes 3, ledger " + engine.name, "ideal 6000/s", ": exact)"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("no %q in the report:\n%s", want, r)
				}
			}
		})
	}
}

// TestPostOrdered: with --ordered the server sees the calls of one order
// key one at a time and in seq order, while different keys are called
// concurrently. The files' names are shuffled, so that the claim order is
// not the seq order; the queue is one batch, so every message is claimed
// before the first call ends.
func TestPostOrdered(t *testing.T) {
	t.Parallel()
	rng := newRand(t)
	q, _ := workQueue(t)
	const keys, perKey = 8, 25
	for k := range keys {
		for seq := 1; seq <= perKey; seq++ {
			name := fmt.Sprintf("%08x.json", rng.Uint32())
			putMessage(t, q, name, orderMessage(fmt.Sprintf("K%d-%d", k, seq), fmt.Sprintf("K%d", k), seq, "1.00"))
		}
	}
	srv := newCallServer(t, 5*time.Millisecond)
	r := mustRun(t, 0, "consume", q, "--post", srv.URL, "--ordered", "--concurrency", "8")
	if st := parseStats(t, r); st.Processed != keys*perKey {
		t.Fatalf("processed %d, want %d\n%s", st.Processed, keys*perKey, r)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for k := range keys {
		got := srv.seqs[fmt.Sprintf("K%d", k)]
		if len(got) != perKey {
			t.Errorf("key K%d: %d calls, want %d", k, len(got), perKey)
			continue
		}
		for i, seq := range got {
			if seq != int64(i+1) {
				t.Errorf("key K%d: calls in seq order %v, want 1..%d", k, got, perKey)
				break
			}
		}
	}
	if srv.orderMax != 1 {
		t.Errorf("up to %d calls of one key in flight at once, want 1", srv.orderMax)
	}
	t.Logf("at most %d calls in flight at once", srv.maxInFlight)
	if srv.maxInFlight < 2 {
		t.Errorf("never more than %d call in flight: different keys must be called concurrently", srv.maxInFlight)
	}
}

// TestPostRate: with --rate 20/s the server sees what the token bucket
// allows, 20 calls a second and a burst of one, however many calls the
// concurrency would allow. The server counts arrivals, which lag the
// tokens by the client's scheduling: on a loaded machine requests whose
// tokens came 50 ms apart may arrive together (CI, under -race beside
// other work, saw 27 in one second). So the bounds leave half a second for
// that lag: the 50 calls span at least 1.5 s (49 tokens take 2.45 s;
// without the cap they take tens of milliseconds), and no second holds
// more than 31 (the tokens of 1.5 s, plus the burst), where an uncapped
// consumer puts all 50.
func TestPostRate(t *testing.T) {
	t.Parallel()
	q, _ := workQueue(t)
	const n = 50
	for i := range n {
		putMessage(t, q, fmt.Sprintf("m%03d.json", i), orderMessage(fmt.Sprintf("m%03d", i), "A", i+1, "1.00"))
	}
	srv := newCallServer(t, time.Millisecond)
	r := mustRun(t, 0, "consume", q, "--post", srv.URL, "--rate", "20/s", "--concurrency", "16")
	if st := parseStats(t, r); st.Processed != n {
		t.Fatalf("processed %d, want %d\n%s", st.Processed, n, r)
	}
	srv.mu.Lock()
	var ts []time.Time
	for _, v := range srv.starts {
		ts = append(ts, v...)
	}
	srv.mu.Unlock()
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i := range ts {
		j := i
		for j < len(ts) && ts[j].Sub(ts[i]) < time.Second {
			j++
		}
		most = max(most, j-i)
	}
	span := ts[len(ts)-1].Sub(ts[0])
	t.Logf("%d calls over %v, at most %d in a second", len(ts), span, most)
	if span < 1500*time.Millisecond {
		t.Errorf("%d calls over %v, want at least 1.5s at --rate 20/s", len(ts), span)
	}
	if most > 31 {
		t.Errorf("%d calls within one second, want at most 31 at --rate 20/s", most)
	}
}

// TestPost429Pauses: a 429 with Retry-After: 1 pauses every new call for a
// second, not only the retry of its own message. The other calls in
// flight when it came finish; none starts until the second is over.
func TestPost429Pauses(t *testing.T) {
	t.Parallel()
	q, _ := workQueue(t)
	const n = 12
	for i := range n {
		putMessage(t, q, fmt.Sprintf("m%03d.json", i), orderMessage(fmt.Sprintf("m%03d", i), "A", i+1, "1.00"))
	}
	srv := newCallServer(t, 0)
	var full bool // under srv.mu
	// The other calls in flight at the 429 are answered 600 ms after it,
	// within its Retry-After of 1 s: their slots free up while the pause
	// holds, and a call started then would be the pause's failure. (The
	// consumer pauses as the 429 returns; 600 ms is the margin for a
	// loaded machine to get there.)
	sent := make(chan struct{}) // closed at the 429, sentAt set
	var sentAt time.Time
	srv.mu.Lock()
	srv.answer = func(key string, nth int) (int, string) {
		if key == "m000" && nth == 0 {
			// Answered once the consumer's other calls have reached
			// the server: any request after the 429 is a new call.
			ok := srv.waitInFlight(4, 5*time.Second)
			srv.mu.Lock()
			full, sentAt = ok, time.Now()
			srv.mu.Unlock()
			close(sent)
			return http.StatusTooManyRequests, "1"
		}
		select {
		case <-sent:
			srv.mu.Lock()
			at := sentAt
			srv.mu.Unlock()
			time.Sleep(time.Until(at.Add(600 * time.Millisecond)))
		case <-time.After(300 * time.Millisecond):
			// m000 is not in flight (the calls of a batch take their
			// slots in any order): answered as before, so that its turn
			// comes with others in flight.
		}
		return 0, ""
	}
	srv.mu.Unlock()
	r := mustRun(t, 0, "consume", q, "--post", srv.URL, "--concurrency", "4", "--retry-base", "10ms", "--retry-wait", "1m", "-v")
	if st := parseStats(t, r); st.Processed != n {
		t.Fatalf("processed %d, want %d\n%s", st.Processed, n, r)
	}
	if c := strings.Count(r.stderr, "calls paused"); c != 1 {
		t.Errorf("the pause was logged %d times, want once:\n%s", c, r.stderr)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.refused) != 1 {
		t.Fatalf("%d refused answers, want 1", len(srv.refused))
	}
	if !full {
		t.Fatalf("the consumer never had 4 requests in flight at once")
	}
	at := srv.refused[0]
	after := 0
	for key, v := range srv.starts {
		for _, s := range v {
			if s.After(at) {
				after++
				if s.Before(at.Add(time.Second)) {
					t.Errorf("key %s called %v after the 429, within its Retry-After", key, s.Sub(at))
				}
			}
		}
	}
	if after == 0 {
		t.Errorf("no call after the 429: the test saw no pause")
	}
}

// TestPostClaimsAheadBounded: a consumer with a slow downstream holds
// claimed only a few batches sized by its concurrency, not a backlog it
// would take minutes to call, so that a second consumer started beside it
// finds messages to call, and both make progress.
func TestPostClaimsAheadBounded(t *testing.T) {
	t.Parallel()
	// More than a batch of 256, the claim size that held some 1 300 of
	// 600: a consumer claiming such batches ahead holds over 150 of these.
	const n = 300
	q, all := shutdownQueue(t, n)
	l := sqliteEngine.open(t, q)
	srv := newCallServer(t, 50*time.Millisecond)
	first := start(t, "consume", q, "--post", srv.URL) // --concurrency 4, the default
	if !srv.waitInFlight(4, cmdTimeout) {
		t.Fatalf("4 calls never were in flight at once\n%s", first.wait(t))
	}
	// 4 × 4 = 16 a batch, about five batches ahead: well under 150, where
	// a batch of 256 held some 1 300.
	most := 0
	for range 20 {
		most = max(most, countClaims(t, q))
		time.Sleep(20 * time.Millisecond) // sampling processing/ as the calls go
	}
	if most > 150 {
		t.Errorf("a consumer making 4 calls at once held up to %d claims, want at most 150", most)
	}
	second := start(t, "consume", q, "--post", srv.URL)
	r1, r2 := first.wait(t), second.wait(t)
	if r1.code != 0 || r2.code != 0 {
		t.Fatalf("consumers failed:\n%s\n%s", r1, r2)
	}
	s1, s2 := parseStats(t, r1), parseStats(t, r2)
	if s2.Processed == 0 {
		t.Errorf("the second consumer processed nothing (first %+v, second %+v): the first held the backlog", s1, s2)
	}
	checkCallsDone(t, q, l, all, n, srv)
}

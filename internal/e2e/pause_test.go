//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// watched is a spool process whose stderr can be read while it runs.
type watched struct {
	*proc
	log  *addrFinder
	base string // its endpoints' URL, with --listen
}

// startWatched starts spool with args; with listen, args hold --listen
// 127.0.0.1:0 and it waits for the address.
func startWatched(t *testing.T, listen bool, args ...string) *watched {
	t.Helper()
	f := &addrFinder{addr: make(chan string, 1)}
	w := &watched{proc: spoolAt{bin: spoolBin, tee: f}.start(t, args...), log: f}
	if !listen {
		return w
	}
	select {
	case addr := <-f.addr:
		w.base = "http://" + addr
	case <-w.done:
		t.Fatalf("spool %q exited before listening\n%s", args, w.result())
	case <-time.After(cmdTimeout):
		t.Fatalf("spool %q logged no \"listening\" record within %v", args, cmdTimeout)
	}
	return w
}

// waitLog waits until w's stderr holds what.
func (w *watched) waitLog(t *testing.T, what string) {
	t.Helper()
	waitFor(t, cmdTimeout, fmt.Sprintf("%q in the log of spool %q", what, w.cmd.Args[1:]), func() bool {
		return strings.Contains(w.log.String(), what)
	})
}

// stop sends SIGTERM and requires exit 0.
func (w *watched) stop(t *testing.T) result {
	t.Helper()
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	r := w.wait(t)
	if r.code != 0 {
		t.Fatalf("want exit 0 at SIGTERM\n%s", r)
	}
	return r
}

// producer puts a message into inbox/ every period until stop, as a
// producer must (hidden name, rename), named p00000.json on.
type producer struct {
	stopc chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	mu    sync.Mutex
	n     int
	err   error
}

func steadyProducer(q string, period time.Duration) *producer {
	p := &producer{stopc: make(chan struct{})}
	p.wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-p.stopc:
				return
			case <-t.C:
			}
			p.mu.Lock()
			id := fmt.Sprintf("p%05d", p.n)
			p.n++
			p.mu.Unlock()
			if err := deliver(q, id+".json", orderMessage(id, "A", 1, "1.00")); err != nil {
				p.mu.Lock()
				p.err = err
				p.mu.Unlock()
				return
			}
		}
	})
	return p
}

// stop stops the producer and returns how many it produced; it may be
// called again.
func (p *producer) stop(t *testing.T) int {
	t.Helper()
	p.once.Do(func() { close(p.stopc) })
	p.wg.Wait()
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.n
}

// claimedNames is every message name out of inbox/: in processing/
// (every session), done/ and error/. processing/ is read first: a claim
// settled between the reads (moved on to done/ or error/, as the calls in
// flight at a pause are) is then seen in one of them, not missed by both.
func claimedNames(t *testing.T, q string) []string {
	t.Helper()
	var out []string
	sessions, err := os.ReadDir(filepath.Join(q, processing))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		if s.IsDir() {
			out = append(out, listNames(t, filepath.Join(q, processing, s.Name()))...)
		}
	}
	for _, s := range []string{done, errorStage} {
		out = append(out, listNames(t, filepath.Join(q, s))...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// claimsOf lists the claims in the session directory of the
// consumer process pid (none when it has no session).
func claimsOf(t *testing.T, q string, pid int) []string {
	t.Helper()
	sessions, err := os.ReadDir(filepath.Join(q, processing))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range sessions {
		if s.IsDir() && strings.Contains(s.Name(), "-"+strconv.Itoa(pid)+"@") {
			out = append(out, listNames(t, filepath.Join(q, processing, s.Name()))...)
		}
	}
	return out
}

// listNames lists the message names of dir (gone: none).
func listNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if n := e.Name(); strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, ".") {
			out = append(out, n)
		}
	}
	return out
}

// callLog is a --exec command that writes STATE/ID.start (holding the
// session that called it) as its call starts and STATE/ID.end as it
// ends, two seconds later.
func callLog(state string) string {
	s := shellQuote(state)
	return `echo "$SPOOL_CONSUMER" > ` + s + `/"$SPOOL_MSG_ID".start; sleep 2; touch ` + s + `/"$SPOOL_MSG_ID".end`
}

// calls reads callLog's files: the msg_ids whose call started, with the
// session, and those whose call ended.
func calls(t *testing.T, state string) (started map[string]string, ended map[string]bool) {
	t.Helper()
	es, err := os.ReadDir(state)
	if err != nil {
		t.Fatal(err)
	}
	started, ended = map[string]string{}, map[string]bool{}
	for _, e := range es {
		switch id, ok := strings.CutSuffix(e.Name(), ".start"); {
		case ok:
			b, err := os.ReadFile(filepath.Join(state, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			started[id] = strings.TrimSpace(string(b))
		default:
			if id, ok := strings.CutSuffix(e.Name(), ".end"); ok {
				ended[id] = true
			}
		}
	}
	return started, ended
}

// TestPauseStopsClaiming: spool pause stops every consumer of the queue
// claiming within a second, one watching before the pause and one
// started while it holds, while a producer goes on adding messages;
// calls in flight at the pause (--exec, two seconds each) finish and are
// settled; status, lag --json, /metrics (spool_paused 1) and /readyz say
// so; spool resume lets both go on; both are audited.
//
// "Stops claiming" is checked from outside: the names out of inbox/
// (claimed into processing/, moved on to done/) are taken once the
// pause has had a second and a half to reach both consumers and the calls
// in flight have ended, and again three seconds later, while the producer
// adds a message every 25 ms: they must be the same, and no call may
// start meanwhile.
func TestPauseStopsClaiming(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	exec := []string{"--exec", callLog(state), "--concurrency", "4", "--batch", "4"}
	prod := steadyProducer(q, 25*time.Millisecond)
	t.Cleanup(func() { prod.stop(t) })
	a := startWatched(t, true, append([]string{"consume", q, "--watch", "--listen", "127.0.0.1:0", "--metrics-refresh", "1s"}, exec...)...)
	waitFor(t, cmdTimeout, "calls in flight in the first consumer", func() bool {
		started, ended := calls(t, state)
		return len(started) >= 4 && len(ended) < len(started)
	})
	waitStatus(t, a.base, "/readyz", 200)

	r := mustRun(t, 0, "pause", q, "--note", "downstream outage")
	paused := time.Now()
	if !strings.Contains(r.stdout, "paused") {
		t.Errorf("pause says:\n%s", r)
	}
	inFlight, _ := calls(t, state)
	b := startWatched(t, false, append([]string{"consume", q, "--watch"}, exec...)...)
	a.waitLog(t, "queue paused")
	b.waitLog(t, "queue paused")

	// The window: a second and a half for the pause to reach both
	// consumers (its poll is a second), and every call that started
	// before it to end (two seconds).
	for time.Since(paused) < 1500*time.Millisecond {
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	waitFor(t, cmdTimeout, "the calls in flight at the pause to end", func() bool {
		started, ended := calls(t, state)
		for id := range started {
			if !ended[id] {
				return false
			}
		}
		return true
	})
	before := claimedNames(t, q)
	startedBefore, _ := calls(t, state)
	window := time.Now()
	for time.Since(window) < 3*time.Second {
		time.Sleep(50 * time.Millisecond) // the window in which nothing may be claimed
	}
	after := claimedNames(t, q)
	startedAfter, ended := calls(t, state)
	if !slices.Equal(before, after) {
		t.Errorf("claims while paused: %d names out of inbox/ at the start of the window, %d at its end", len(before), len(after))
	}
	if len(startedAfter) != len(startedBefore) {
		t.Errorf("calls while paused: %d started at the start of the window, %d at its end", len(startedBefore), len(startedAfter))
	}
	// The consumer started while paused has claimed nothing at all (a
	// consumer gated at its calls alone would claim a window's worth and
	// hold them).
	if n := len(claimsOf(t, q, b.cmd.Process.Pid)); n != 0 {
		t.Errorf("the consumer started while paused holds %d claims", n)
	}
	// The calls in flight at the pause finished, and were settled.
	for id := range inFlight {
		if !ended[id] {
			t.Errorf("call of %s, in flight at the pause, did not finish", id)
		}
	}
	l := sqliteCallLedger(t, q)
	waitFor(t, cmdTimeout, "the calls that ended to be settled", func() bool {
		return l.count(t, "SELECT COUNT(*) FROM %[1]s") == len(ended)
	})
	if n := len(listNames(t, filepath.Join(q, inbox))); n == 0 {
		t.Fatal("inbox/ is empty: the producer did not keep up the test's premise")
	}

	// Every face says it is paused.
	var st struct {
		Paused *struct{ By, Note string } `json:"paused"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, "status", q, "--json").stdout), &st); err != nil {
		t.Fatal(err)
	}
	if st.Paused == nil || st.Paused.Note != "downstream outage" || !strings.HasPrefix(st.Paused.By, "os:") {
		t.Errorf("status --json paused = %+v", st.Paused)
	}
	if r := mustRun(t, 0, "status", q); !strings.Contains(r.stdout, "PAUSED") || !strings.Contains(r.stdout, "downstream outage") {
		t.Errorf("status does not say paused:\n%s", r.stdout)
	}
	var lag struct {
		Paused *bool `json:"paused"`
		Held   int   `json:"held"`
	}
	if err := json.Unmarshal([]byte(run(t, "lag", q, "1000000", "--json").stdout), &lag); err != nil {
		t.Fatal(err)
	}
	if lag.Paused == nil || !*lag.Paused {
		t.Errorf("lag --json paused = %v, want true", lag.Paused)
	}
	waitMetrics(t, a.base, []want{{name: "spool_paused", value: 1}})
	if _, body := get(t, a.base, "/readyz"); !strings.HasPrefix(body, "ready, paused: by os:") || !strings.Contains(body, "downstream outage") {
		t.Errorf("/readyz while paused: %q, want 200 ready, paused: who and why", body)
	}

	// Resume: both go on.
	resumed := mustRun(t, 0, "resume", q)
	if !strings.Contains(resumed.stdout, "resumed") {
		t.Errorf("resume says:\n%s", resumed)
	}
	a.waitLog(t, "queue resumed")
	b.waitLog(t, "queue resumed")
	waitFor(t, cmdTimeout, "calls of both consumers after the resume", func() bool {
		started, _ := calls(t, state)
		by := map[string]bool{}
		for id, session := range started {
			if _, old := startedAfter[id]; !old {
				by[session[strings.LastIndex(session, "-")+1:]] = true
			}
		}
		return by[strconv.Itoa(a.cmd.Process.Pid)+"@"+ownHost(t)] && by[strconv.Itoa(b.cmd.Process.Pid)+"@"+ownHost(t)]
	})
	waitMetrics(t, a.base, []want{{name: "spool_paused", value: 0}})
	produced := prod.stop(t)
	for _, w := range []*watched{a, b} {
		r := w.stop(t)
		if n := strings.Count(r.stderr, "queue paused"); n != 1 {
			t.Errorf("spool %q said %d times that the queue is paused, want once\n%s", w.cmd.Args[1:3], n, r.stderr)
		}
	}
	// The rest, without waiting two seconds a call: nothing was lost.
	mustRun(t, 0, "consume", q, "--exec", "true")
	if n := l.count(t, "SELECT COUNT(*) FROM %[1]s"); n != produced {
		t.Errorf("%d processed, want every one of the %d produced", n, produced)
	}
	requireHoldAudit(t, q, []string{"pause", "resume"}, "downstream outage")
}

// ownHost is this host's name as a session's name ends with it.
func ownHost(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer("/", "_", "@", "_").Replace(h)
}

// requireHoldAudit requires the audit rows of pause, resume, hold and
// release, in order, to be actions (each "action" closed ok, or
// "action:outcome"), each by the OS user; the first's selection holds
// note.
func requireHoldAudit(t *testing.T, q string, actions []string, note string, db ...string) {
	t.Helper()
	var rows []struct {
		Actor, Action, Outcome string
		Selection              json.RawMessage
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, append([]string{"audit", q, "--json"}, db...)...).stdout), &rows); err != nil {
		t.Fatal(err)
	}
	var got []string
	first := true
	for _, r := range rows {
		if !slices.Contains([]string{"pause", "resume", "hold", "release"}, r.Action) {
			continue
		}
		a := r.Action
		if r.Outcome != "ok" {
			a += ":" + r.Outcome
		}
		got = append(got, a)
		if !strings.HasPrefix(r.Actor, "os:") {
			t.Errorf("audit row %+v: want by the OS user", r)
		}
		if first && !strings.Contains(string(r.Selection), note) {
			t.Errorf("audit row of %s: selection %s lacks the note %q", r.Action, r.Selection, note)
		}
		first = false
	}
	if !slices.Equal(got, actions) {
		t.Fatalf("audited %v, want %v", got, actions)
	}
}

// TestPauseSurvivesRestart: a pause lives in the ledger (on every
// engine): a drain of a paused queue claims nothing, says so and exits 0;
// a watch started on it waits, and so does one started again after a
// stop; once resumed, the watch consumes everything.
func TestPauseSurvivesRestart(t *testing.T) {
	t.Parallel()
	for _, engine := range []ledgerBackend{sqliteEngine, postgresEngine, mysqlEngine} {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			pauseSurvivesRestart(t, engine)
		})
	}
}

func pauseSurvivesRestart(t *testing.T, engine ledgerBackend) {
	q, _ := workQueue(t)
	l := engine.open(t, q)
	db := l.args
	const n = 20
	for i := range n {
		putMessage(t, q, fmt.Sprintf("m%02d.json", i), orderMessage(fmt.Sprintf("m%02d", i), "A", i+1, "1.00"))
	}
	mustRun(t, 0, append([]string{"pause", q, "--note", "bad deploy"}, db...)...)
	if r := mustRun(t, 0, append([]string{"pause", q}, db...)...); !strings.Contains(r.stdout, "paused already") || !strings.Contains(r.stdout, "bad deploy") {
		t.Errorf("a second pause says:\n%s", r)
	}
	r := mustRun(t, 0, append([]string{"consume", q}, db...)...)
	if st := parseStats(t, r); st != (consumeStats{}) {
		t.Errorf("a drain of a paused queue: %+v, want nothing done\n%s", st, r)
	}
	if !strings.Contains(r.stderr, "queue paused") || !strings.Contains(r.stderr, "bad deploy") {
		t.Errorf("the drain does not say the queue is paused, and why:\n%s", r.stderr)
	}
	if got := len(listNames(t, filepath.Join(q, inbox))); got != n {
		t.Fatalf("inbox/ holds %d after a paused drain, want %d", got, n)
	}
	for range 2 {
		w := startWatched(t, false, append([]string{"consume", q, "--watch"}, db...)...)
		w.waitLog(t, "queue paused")
		if got := len(claimedNames(t, q)); got != 0 {
			t.Fatalf("%d claimed by a watch of a paused queue", got)
		}
		w.stop(t)
	}
	w := startWatched(t, false, append([]string{"consume", q, "--watch"}, db...)...)
	w.waitLog(t, "queue paused")
	mustRun(t, 0, append([]string{"resume", q}, db...)...)
	if r := mustRun(t, 0, append([]string{"resume", q}, db...)...); !strings.Contains(r.stdout, "not paused") {
		t.Errorf("a second resume says:\n%s", r)
	}
	waitFor(t, cmdTimeout, "the watch to consume everything once resumed", func() bool {
		return l.count(t, "SELECT COUNT(*) FROM %[1]s") == n
	})
	w.stop(t)
	requireHoldAudit(t, q, []string{"pause", "pause", "resume", "resume"}, "bad deploy", db...)
}

// TestResumeTaskOrQueue: spool resume DIR resumes the queue, spool resume
// DIR ID a task; a second argument that is not a task's number is a usage
// error naming it, and --note is the queue's alone.
func TestResumeTaskOrQueue(t *testing.T) {
	t.Parallel()
	q, _ := workQueue(t)
	if r := mustRun(t, 0, "resume", q); !strings.Contains(r.stdout, "not paused") || !strings.Contains(r.stdout, "spool resume DIR ID") {
		t.Errorf("resume of a queue not paused:\n%s", r)
	}
	if r := mustRun(t, 2, "resume", q, "x.json"); !strings.Contains(r.stderr, `task ID "x.json"`) {
		t.Errorf("resume DIR NOT-AN-ID:\n%s", r)
	}
	if r := mustRun(t, 2, "resume", q, "7", "--note", "x"); !strings.Contains(r.stderr, "--note is for resuming a queue") {
		t.Errorf("resume DIR ID --note:\n%s", r)
	}
	if r := mustRun(t, 1, "resume", q, "7"); !strings.Contains(r.stderr, "7") {
		t.Errorf("resume of an unknown task:\n%s", r)
	}
}

// TestHoldRelease: spool hold holds a file of inbox/ (moved into held/)
// and a msg_id (its deliveries set aside into held/ by the consumer that
// reads them), on every engine: the rest of the queue drains around them,
// across consumer restarts, and a redelivery of the held msg_id is held
// too; status, lag --json, holds, show and fsck say they are held, not
// lost; a file whose msg_id is held is released only with its msg_id;
// released, they are consumed; every action is audited.
func TestHoldRelease(t *testing.T) {
	t.Parallel()
	for _, engine := range []ledgerBackend{sqliteEngine, postgresEngine, mysqlEngine} {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			holdRelease(t, engine)
		})
	}
}

func holdRelease(t *testing.T, engine ledgerBackend) {
	q, _ := workQueue(t)
	l := engine.open(t, q)
	db := l.args
	with := func(args ...string) []string { return append(args, db...) }
	const n = 10
	for i := range n {
		putMessage(t, q, fmt.Sprintf("m%02d.json", i), orderMessage(fmt.Sprintf("m%02d", i), "A", i+1, "1.00"))
	}
	if r := mustRun(t, 0, with("hold", q, "m03.json", "--note", "customer asked")...); !strings.Contains(r.stdout, "held m03.json as held/m03.json") {
		t.Errorf("hold FILE says:\n%s", r)
	}
	if r := mustRun(t, 0, with("hold", q, "--msg-id", "m07", "--note", "suspicious")...); !strings.Contains(r.stdout, "msg_id m07 held") {
		t.Errorf("hold --msg-id says:\n%s", r)
	}
	if r := mustRun(t, 1, with("hold", q, "m99.json")...); !strings.Contains(r.stderr, "m99.json: not in inbox/") {
		t.Errorf("hold of a name not in inbox/:\n%s", r)
	}
	mustRun(t, 2, with("hold", q, "../m01.json")...)
	processed := func() int { return l.count(t, "SELECT COUNT(*) FROM %[1]s") }

	// Two runs, each a consumer started anew: the rest drains, the held
	// ones stay held, and a redelivery of the held msg_id is held too.
	r := mustRun(t, 0, with("consume", q)...)
	if st := parseStats(t, r); st.Processed != n-2 {
		t.Errorf("first drain: %+v, want %d processed\n%s", st, n-2, r)
	}
	if !strings.Contains(r.stderr, "held aside") || !strings.Contains(r.stderr, "m07") {
		t.Errorf("the consumer does not say it held m07 aside:\n%s", r.stderr)
	}
	putMessage(t, q, "m07-again.json", orderMessage("m07", "A", 8, "1.00"))
	if st := parseStats(t, mustRun(t, 0, with("consume", q)...)); st != (consumeStats{}) {
		t.Errorf("second drain: %+v, want nothing processed", st)
	}
	if got, want := listNames(t, filepath.Join(q, "held")), []string{"m03.json", "m07-again.json", "m07.json"}; !slices.Equal(got, want) {
		t.Fatalf("held/ holds %v, want %v", got, want)
	}
	if got := listNames(t, filepath.Join(q, inbox)); len(got) != 0 {
		t.Fatalf("inbox/ holds %v", got)
	}
	if got := processed(); got != n-2 {
		t.Fatalf("%d processed, want %d", got, n-2)
	}

	// Every face says they are held.
	var st struct {
		Held struct {
			Files  int `json:"files"`
			MsgIDs int `json:"msg_ids"`
		} `json:"held"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, with("status", q, "--json")...).stdout), &st); err != nil {
		t.Fatal(err)
	}
	if st.Held.Files != 3 || st.Held.MsgIDs != 1 {
		t.Errorf("status --json held = %+v, want 3 files, 1 msg_id", st.Held)
	}
	var lag struct{ Held int }
	if err := json.Unmarshal([]byte(mustRun(t, 0, with("lag", q, "0", "--json")...).stdout), &lag); err != nil || lag.Held != 3 {
		t.Errorf("lag --json held = %d (%v), want 3", lag.Held, err)
	}
	var holds struct {
		MsgIDs []struct {
			MsgID string `json:"msg_id"`
			Note  string `json:"note"`
		} `json:"msg_ids"`
		Files []struct {
			File          string  `json:"file"`
			MsgID         *string `json:"msg_id"`
			Cause, Origin *string
			Note          string `json:"note"`
			Recorded      bool   `json:"recorded"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, with("holds", q, "--json")...).stdout), &holds); err != nil {
		t.Fatal(err)
	}
	if len(holds.MsgIDs) != 1 || holds.MsgIDs[0].MsgID != "m07" || holds.MsgIDs[0].Note != "suspicious" {
		t.Errorf("holds --json msg_ids = %+v", holds.MsgIDs)
	}
	causes := map[string]string{}
	for _, f := range holds.Files {
		if !f.Recorded || f.Cause == nil || f.MsgID == nil {
			t.Errorf("holds --json file %+v: want recorded, with its cause and msg_id", f)
			continue
		}
		causes[f.File] = *f.Cause + " " + *f.MsgID + " " + f.Note
	}
	if want := map[string]string{"m03.json": "file m03 customer asked", "m07.json": "msg_id m07 suspicious", "m07-again.json": "msg_id m07 suspicious"}; !maps.Equal(causes, want) {
		t.Errorf("holds --json files = %v, want %v", causes, want)
	}
	if r := mustRun(t, 0, with("show", q, "m03.json")...); !strings.Contains(r.stdout, "held/m03.json") || !strings.Contains(r.stdout, "customer asked") {
		t.Errorf("show of a held file:\n%s", r.stdout)
	}
	if r := mustRun(t, 0, with("show", q, "m07")...); !strings.Contains(r.stdout, "msg_id held") || !strings.Contains(r.stdout, "held/m07-again.json") {
		t.Errorf("show of a held msg_id:\n%s", r.stdout)
	}
	rep := fsck(t, 0, q, db...)
	if k := rep.kinds(); k["held"] != 3 {
		t.Errorf("fsck while held: %v, want 3 held, no problem", k)
	}

	// A file whose msg_id is held goes back only with its msg_id.
	if r := mustRun(t, 1, with("release", q, "m07.json")...); !strings.Contains(r.stderr, "its msg_id m07 is held") {
		t.Errorf("release of a file whose msg_id is held:\n%s", r)
	}
	if r := mustRun(t, 0, with("release", q, "m03.json")...); !strings.Contains(r.stdout, "released m03.json as inbox/m03.json") {
		t.Errorf("release FILE says:\n%s", r)
	}
	if st := parseStats(t, mustRun(t, 0, with("consume", q)...)); st.Processed != 1 {
		t.Errorf("drain after the release of m03: %+v, want 1 processed", st)
	}
	r = mustRun(t, 0, with("release", q, "--msg-id", "m07")...)
	if !strings.Contains(r.stdout, "msg_id m07 released") || strings.Count(r.stdout, "released held/") != 2 {
		t.Errorf("release --msg-id says:\n%s", r)
	}
	if st := parseStats(t, mustRun(t, 0, with("consume", q)...)); st.Processed != 1 || st.Duplicates != 1 {
		t.Errorf("drain after the release of m07: %+v, want 1 processed, 1 duplicate", st)
	}
	if got := processed(); got != n {
		t.Errorf("%d processed, want %d", got, n)
	}
	if got := listNames(t, filepath.Join(q, "held")); len(got) != 0 {
		t.Errorf("held/ still holds %v", got)
	}
	if k := fsck(t, 0, q, db...).kinds(); k["held"] != 0 || len(k) != 0 {
		t.Errorf("fsck at the end: %v, want nothing", k)
	}
	requireHoldAudit(t, q, []string{"hold", "hold", "hold:refused", "release:refused", "release", "release"}, "customer asked", db...)
}

// TestConsolePauseAndHold: the API pauses, resumes, holds and releases
// for an operator (a viewer is refused, 403, audited); the overview
// carries the pause and the counts held; GET holds lists them; each
// action is audited with the token's name and role.
func TestConsolePauseAndHold(t *testing.T) {
	t.Parallel()
	q, base := consoleQueue(t, 0, 0)
	for i := range 3 {
		putMessage(t, q, fmt.Sprintf("h%d.json", i), orderMessage(fmt.Sprintf("h%d", i), "A", i+1, "1.00"))
	}
	const viewer, operator = "vic-token", "olga-token"
	_, last := consoleAudit(t, q, 0)
	for _, a := range []struct {
		token, path, body string
		code              int
		audit             string
	}{
		{viewer, "/api/v1/pause", `{"note": "no"}`, 403, "token:vic viewer pause refused"},
		{operator, "/api/v1/pause", `{"note": "outage", "x": 1}`, 400, "token:olga operator pause refused"},
		{operator, "/api/v1/pause", `{"note": "outage"}`, 200, "token:olga operator pause ok"},
		{viewer, "/api/v1/holds", `{"files": ["h0.json"]}`, 403, "token:vic viewer hold refused"},
		{operator, "/api/v1/holds", `{"files": ["h0.json"], "msg_ids": ["h2"], "note": "look first"}`, 200, "token:olga operator hold ok"},
		{operator, "/api/v1/holds", `{"files": ["../x.json"]}`, 400, "token:olga operator hold refused"},
	} {
		code, body := apiCall(t, base, a.token, "POST", a.path, a.body)
		if code != a.code {
			t.Errorf("POST %s %s as %s: %d %s, want %d", a.path, a.body, a.token, code, body, a.code)
		}
		var rows []string
		rows, last = consoleAudit(t, q, last)
		if strings.Join(rows, "|") != a.audit {
			t.Errorf("POST %s as %s: audit %q, want %q", a.path, a.token, rows, a.audit)
		}
	}
	var ov struct {
		Paused *struct {
			Paused   bool
			By, Note string
		} `json:"paused"`
		Held *struct {
			Files  int `json:"files"`
			MsgIDs int `json:"msg_ids"`
		} `json:"held"`
	}
	_, body := apiCall(t, base, viewer, "GET", "/api/v1/overview", "")
	if err := json.Unmarshal([]byte(body), &ov); err != nil {
		t.Fatal(err)
	}
	if ov.Paused == nil || !ov.Paused.Paused || ov.Paused.By != "token:olga" || ov.Paused.Note != "outage" {
		t.Errorf("overview paused = %+v\n%s", ov.Paused, body)
	}
	if ov.Held == nil || ov.Held.Files != 1 || ov.Held.MsgIDs != 1 {
		t.Errorf("overview held = %+v\n%s", ov.Held, body)
	}
	code, body := apiCall(t, base, viewer, "GET", "/api/v1/holds", "")
	if code != 200 || !strings.Contains(body, `"file": "h0.json"`) || !strings.Contains(body, `"msg_id": "h2"`) || !strings.Contains(body, `"look first"`) {
		t.Errorf("GET holds: %d %s", code, body)
	}
	for _, a := range []struct{ path, body, audit string }{
		{"/api/v1/holds/release", `{"files": ["h0.json"], "msg_ids": ["h2"]}`, "token:olga operator release ok"},
		{"/api/v1/resume", `{}`, "token:olga operator resume ok"},
	} {
		if code, body := apiCall(t, base, operator, "POST", a.path, a.body); code != 200 {
			t.Errorf("POST %s: %d %s", a.path, code, body)
		}
		var rows []string
		rows, last = consoleAudit(t, q, last)
		if strings.Join(rows, "|") != a.audit {
			t.Errorf("POST %s: audit %q, want %q", a.path, rows, a.audit)
		}
	}
	_, body = apiCall(t, base, viewer, "GET", "/api/v1/overview", "")
	if err := json.Unmarshal([]byte(body), &ov); err != nil {
		t.Fatal(err)
	}
	if ov.Paused != nil || ov.Held == nil || ov.Held.Files != 0 || ov.Held.MsgIDs != 0 {
		t.Errorf("overview after the resume and release: paused %+v, held %+v", ov.Paused, ov.Held)
	}
	if n := len(listNames(t, filepath.Join(q, inbox))); n != 3 {
		t.Errorf("inbox/ holds %d, want the 3 messages back", n)
	}
}

//go:build linux

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/spoolq/spool/internal/testenv"
)

// envelope is what the relay sends for an event, as a receiver reads it.
type envelope struct {
	MsgID     string          `json:"msg_id"`
	Aggregate string          `json:"aggregate"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
	OutboxID  int64           `json:"outbox_id"`
}

func decodeEnvelope(t *testing.T, b []byte) envelope {
	t.Helper()
	var e envelope
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("event %q: %v", b, err)
	}
	if e.Type != "payment" || len(e.Payload) == 0 || e.Payload[0] != '{' {
		t.Fatalf("event %q: want type payment and the row's JSON payload", b)
	}
	return e
}

// TestRelayDir: relays to another spool queue, killed at random, then run
// to the end: every row is a file in the other queue's inbox/, named
// after its event id, at least once and in row order within each
// aggregate; the receiving consumer's ledger makes each event one
// processed row and every repeat a duplicate.
func TestRelayDir(t *testing.T) { t.Parallel(); testRelayDir(t, 1) }

// TestRelayDirTwoRelays: the same with two relays at once.
func TestRelayDirTwoRelays(t *testing.T) { t.Parallel(); testRelayDir(t, 2) }

func testRelayDir(t *testing.T, relays int) {
	rng := newRand(t)
	n := testenv.Pick(3000, 400)
	q, id := outboxQueue(t, n, 7)
	b, _ := workQueue(t)
	writeFile(t, b, "spool.conf", `{"required": ["msg_id"]}`)
	relayKills(t, rng, q, "dir://"+b, relays, testenv.Pick(30, 5))

	got := dirReceived(t, b)
	repeats := checkReceived(t, q, id, n, got)
	r := mustRun(t, 0, "consume", b)
	if st := parseStats(t, r); st.Processed != n || st.Duplicates != repeats || st.DeadLetters != 0 {
		t.Fatalf("the receiving queue: %+v, want %d processed and %d duplicates", st, n, repeats)
	}
	t.Logf("%d events, %d repeats absorbed by the receiving ledger", n, repeats)
}

// TestRelayHTTP: relays to a local HTTP server that refuses some requests
// (503, a transient failure) and loses the response of others after
// taking them (500 after recording): killed at random, then run to the
// end, every row was taken at least once under its Idempotency-Key, in row
// order within each aggregate, and the distinct keys are the rows.
func TestRelayHTTP(t *testing.T) { t.Parallel(); testRelayHTTP(t, 1) }

// TestRelayHTTPTwoRelays: the same with two relays at once.
func TestRelayHTTPTwoRelays(t *testing.T) { t.Parallel(); testRelayHTTP(t, 2) }

func testRelayHTTP(t *testing.T, relays int) {
	rng := newRand(t)
	n := testenv.Pick(2000, 300)
	q, id := outboxQueue(t, n, 5)
	var mu sync.Mutex
	var got []received
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		requests++
		if requests%11 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var e envelope
		if err := json.Unmarshal(body, &e); err != nil || e.MsgID != r.Header.Get("Idempotency-Key") || r.Method != http.MethodPost {
			t.Errorf("%s with Idempotency-Key %q: body %q", r.Method, r.Header.Get("Idempotency-Key"), body)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		got = append(got, received{e.MsgID, e.Aggregate, e.OutboxID})
		if requests%13 == 0 {
			w.WriteHeader(http.StatusInternalServerError) // taken, the answer lost
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	relayKills(t, rng, q, srv.URL+"/events", relays, testenv.Pick(30, 5))
	mu.Lock()
	defer mu.Unlock()
	repeats := checkReceived(t, q, id, n, got)
	t.Logf("%d requests, %d events taken, %d repeats", requests, n, repeats)
}

// dirReceived is what a receiving queue b holds in inbox/, in the order
// the relays wrote it: by mtime, equal ones (the clock's tick) in name
// order, so that a later row's first file written strictly before an
// earlier row's is an inversion. Each file must be named after its event.
func dirReceived(t *testing.T, b string) []received {
	t.Helper()
	type file struct {
		env   envelope
		mtime int64
		name  string
	}
	des, err := os.ReadDir(filepath.Join(b, inbox))
	if err != nil {
		t.Fatal(err)
	}
	var files []file
	for _, de := range des {
		if !isMessageName(de.Name()) {
			continue
		}
		path := filepath.Join(b, inbox, de.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		e := decodeEnvelope(t, data)
		if !strings.HasPrefix(de.Name(), e.MsgID) {
			t.Fatalf("file %s holds event %s: want it named after the event", de.Name(), e.MsgID)
		}
		files = append(files, file{e, st.Mtim.Nano(), de.Name()})
	}
	sort.SliceStable(files, func(i, j int) bool {
		if files[i].mtime != files[j].mtime {
			return files[i].mtime < files[j].mtime
		}
		return files[i].name < files[j].name
	})
	var got []received
	for _, f := range files {
		got = append(got, received{f.env.MsgID, f.env.Aggregate, f.env.OutboxID})
	}
	return got
}

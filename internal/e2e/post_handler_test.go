//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// The --post handler end to end against a local server: status codes,
// Retry-After and the Idempotency-Key (calls*_test.go test concurrency,
// crashes and the pause).

// postHit is one request the test's HTTP server received.
type postHit struct {
	at          time.Time
	key, ctype  string
	body        []byte
	bodyMessage string // the msg_id in the body
}

// TestPostHandler: --post against a local server: a 503 with Retry-After
// is retried no sooner than asked, then processed; a 429 is retried; a 400
// is a dead letter at once with the status and the body in its detail;
// every request carries the message and its msg_id as Idempotency-Key.
func TestPostHandler(t *testing.T) {
	t.Parallel()
	q, _ := workQueue(t)
	var mu sync.Mutex
	var hits []postHit
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			MsgID string `json:"msg_id"`
		}
		_ = json.Unmarshal(body, &m)
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		hits = append(hits, postHit{at: time.Now(), key: key, ctype: r.Header.Get("Content-Type"), body: body, bodyMessage: m.MsgID})
		n := 0
		for _, h := range hits {
			if h.key == key {
				n++
			}
		}
		mu.Unlock()
		switch {
		case key == "RETRY" && n == 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "down for maintenance")
			return
		case key == "LIMIT" && n == 1:
			w.WriteHeader(http.StatusTooManyRequests)
			return
		case key == "BAD":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"amount must be positive"}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)

	bodies := map[string]string{
		"retry.json": orderMessage("RETRY", "O", 1, "1.00"),
		"limit.json": orderMessage("LIMIT", "O", 2, "2.00"),
		"bad.json":   orderMessage("BAD", "O", 3, "-3.00"),
		"ok.json":    orderMessage("OK", "O", 4, "4.00"),
	}
	for name, body := range bodies {
		putMessage(t, q, name, body)
	}
	r := mustRun(t, 0, "consume", q, "--post", srv.URL+"/orders", "--retry-base", "20ms", "--retry-max", "4", "--retry-jitter=false", "--retry-wait", "1m")
	if st := parseStats(t, r); st.Processed != 3 || st.DeadLetters != 1 {
		t.Fatalf("stats %+v, want 3 processed, 1 dead letter\n%s", st, r)
	}

	mu.Lock()
	defer mu.Unlock()
	byKey := map[string][]postHit{}
	for _, h := range hits {
		byKey[h.key] = append(byKey[h.key], h)
		if h.key != h.bodyMessage || h.ctype != "application/json" {
			t.Errorf("request with Idempotency-Key %q for msg_id %q, Content-Type %q", h.key, h.bodyMessage, h.ctype)
		}
		if string(h.body) != bodies[strings.ToLower(h.key)+".json"] {
			t.Errorf("request %s: body %q, want the message's bytes", h.key, h.body)
		}
	}
	for key, want := range map[string]int{"RETRY": 2, "LIMIT": 2, "BAD": 1, "OK": 1} {
		if len(byKey[key]) != want {
			t.Errorf("%s: %d requests, want %d", key, len(byKey[key]), want)
		}
	}
	if h := byKey["RETRY"]; len(h) == 2 {
		// Measured from the server's side of the first attempt, a few
		// milliseconds after the ledger started counting the delay.
		if g := h[1].at.Sub(h[0].at); g < time.Second-50*time.Millisecond {
			t.Errorf("RETRY was retried %v after a 503 with Retry-After: 1", g)
		}
	}
	if got := names(t, q, errorStage); len(got) != 1 || got[0] != "bad.json" {
		t.Errorf("error/ holds %q, want bad.json", got)
	}
	db := openLedger(t, q)
	if dl := deadLetterOf(t, db, "bad.json"); dl.Reason != "handler" || dl.Attempts != 1 || dl.Detail != `post: 400 Bad Request: {"error":"amount must be positive"}` {
		t.Errorf("dead letter %+v, want reason handler after 1 attempt, the status and the body", dl)
	}
	if rows := processedRows(t, db); len(rows) != 3 {
		t.Errorf("processed holds %d rows, want 3", len(rows))
	}
}

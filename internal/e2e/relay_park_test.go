//go:build linux

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestRelayParks: a row the target refuses for good (a 400) is parked
// with its reason, shown by spool status; under --on-park block the
// later rows of its aggregate wait and the other aggregates are all
// delivered; --unpark puts it back, and once the target takes it the
// aggregate goes on in order. Under --on-park skip the later rows go on
// without it. Once all are published, prune removes them.
func TestRelayParks(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"block", "skip"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			q, id := outboxQueue(t, 40, 4) // a00..a03, 10 rows each
			var refuse atomic.Bool
			refuse.Store(true)
			var mu sync.Mutex
			var got []received
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				var e envelope
				if err := json.Unmarshal(body, &e); err != nil {
					w.WriteHeader(http.StatusBadRequest)
					return
				}
				// a01's third row (row 10: rows go a00, a01, a02, a03, a00...).
				if refuse.Load() && e.OutboxID == 10 {
					http.Error(w, "amount out of range", http.StatusBadRequest)
					return
				}
				mu.Lock()
				got = append(got, received{e.MsgID, e.Aggregate, e.OutboxID})
				mu.Unlock()
				w.WriteHeader(http.StatusOK)
			}))
			t.Cleanup(srv.Close)
			r := mustRun(t, 0, "relay", q, "--to", srv.URL, "--on-park", policy)
			if !strings.Contains(r.stdout, "parked=1") || !strings.Contains(r.stderr, "400 Bad Request") {
				t.Fatalf("want one row parked and its refusal logged:\n%s", r)
			}
			byAgg := map[string]int{}
			mu.Lock()
			for _, g := range got {
				byAgg[g.Aggregate]++
			}
			mu.Unlock()
			wantA01 := 2 // rows 2 and 6, before the parked row 10
			if policy == "skip" {
				wantA01 = 9
			}
			if byAgg["a00"] != 10 || byAgg["a02"] != 10 || byAgg["a03"] != 10 || byAgg["a01"] != wantA01 {
				t.Fatalf("delivered per aggregate: %v, want 10 each and %d of a01", byAgg, wantA01)
			}
			st := mustRun(t, 0, "status", q)
			if !strings.Contains(st.stdout, "1 parked") || !strings.Contains(st.stdout, "row 10 (payment of a01, 1 attempts): post: 400 Bad Request: amount out of range") {
				t.Fatalf("status does not show the parked row with its reason:\n%s", st)
			}
			var js struct {
				Outbox struct {
					Pending, Parked int
					ParkedRows      []struct{ ID int64 } `json:"parked_rows"`
				}
			}
			if err := json.Unmarshal([]byte(mustRun(t, 0, "status", q, "--json").stdout), &js); err != nil {
				t.Fatal(err)
			}
			if js.Outbox.Parked != 1 || len(js.Outbox.ParkedRows) != 1 || js.Outbox.ParkedRows[0].ID != 10 || js.Outbox.Pending != 10-wantA01-1 {
				t.Fatalf("status --json outbox: %+v", js.Outbox)
			}
			// The cause fixed, the row put back: all delivered.
			refuse.Store(false)
			if r := mustRun(t, 0, "relay", q, "--unpark", "--aggregate", "a01"); !strings.Contains(r.stdout, "unparked=1") {
				t.Fatalf("unpark:\n%s", r)
			}
			mustRun(t, 0, "relay", q, "--to", srv.URL, "--on-park", policy)
			mu.Lock()
			defer mu.Unlock()
			if policy == "block" {
				checkReceived(t, q, id, 40, got)
			} else if len(got) != 40 {
				t.Fatalf("%d events delivered, want 40", len(got))
			}
			// Every row published: prune removes them all, past any window.
			if r := mustRun(t, 0, "prune", q, "--older-than", "1ns"); !strings.HasSuffix(r.stdout, " outbox=40\n") {
				t.Fatalf("prune of the published rows:\n%s", r)
			}
			if n := pendingRows(t, q); n != 0 {
				t.Fatalf("%d rows pending after prune", n)
			}
		})
	}
}

// TestRelayHTTPHeaders: a row's headers (a W3C traceparent, a tenant)
// reach the HTTP receiver as request headers, with the event's aggregate
// and type, and in the body's headers object.
func TestRelayHTTPHeaders(t *testing.T) {
	t.Parallel()
	q, _ := outboxQueue(t, 1, 1)
	const trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	db := openLedgerRW(t, filepath.Join(q, "ledger.db"))
	if _, err := db.Exec(`UPDATE outbox SET headers = ?`, `{"traceparent":"`+trace+`","tenant":"acme"}`); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen http.Header
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen = r.Header.Clone()
		body, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	mustRun(t, 0, "relay", q, "--to", srv.URL)
	mu.Lock()
	defer mu.Unlock()
	if seen.Get("Traceparent") != trace || seen.Get("Tenant") != "acme" || seen.Get("Spool-Aggregate") != "a00" ||
		seen.Get("Spool-Type") != "payment" || seen.Get("Content-Type") != "application/json" || seen.Get("Idempotency-Key") == "" {
		t.Fatalf("request headers: %v", seen)
	}
	var e struct{ Headers map[string]string }
	if err := json.Unmarshal(body, &e); err != nil || e.Headers["traceparent"] != trace || e.Headers["tenant"] != "acme" {
		t.Fatalf("body %s: headers %v, %v", body, e.Headers, err)
	}
}

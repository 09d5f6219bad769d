package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/task"
)

// scaleQueue is a queue whose ledger records n dead letters (60% parse,
// 30% missing-field, 10% handler failures whose detail names an order),
// each with its file in error/, every 50th of them replayed since (its
// file gone from error/): the API's pages and groups read the ledger's
// index, and check each record they list against error/. It returns the
// server's handler and the number of dead letters still current.
func scaleQueue(tb testing.TB, n int) (http.Handler, int) {
	tb.Helper()
	ctx := context.Background()
	path := filepath.Join(tb.TempDir(), "q")
	if err := queue.Init(path); err != nil {
		tb.Fatal(err)
	}
	d, err := queue.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	l, err := sqlite.Open(ctx, filepath.Join(path, "ledger.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	inos := make([]uint64, n)
	for j := range n {
		name := filepath.Join(path, "error", fmt.Sprintf("m-%07d.json", j))
		if err := os.WriteFile(name, []byte("{}"), 0o644); err != nil {
			tb.Fatal(err)
		}
		fi, err := os.Stat(name)
		if err != nil {
			tb.Fatal(err)
		}
		inos[j] = fi.Sys().(*syscall.Stat_t).Ino
	}
	current := 0
	const batch = 1000
	for i := 0; i < n; i += batch {
		var b []*spool.Delivery
		for j := i; j < min(i+batch, n); j++ {
			rej := &spool.RejectError{Reason: spool.ReasonParse, Detail: fmt.Sprintf("unexpected end of input at offset %d", j%97)}
			switch j % 10 {
			case 6, 7, 8:
				rej = &spool.RejectError{Reason: spool.ReasonMissingField, Field: "msg_id", Detail: "required field is missing"}
			case 9:
				rej = &spool.RejectError{Reason: spool.ReasonHandler, Detail: fmt.Sprintf("POST https://billing/orders/o-%d: 503 Service Unavailable", j)}
			}
			b = append(b, &spool.Delivery{Claim: fmt.Sprintf("c-%d", j), File: fmt.Sprintf("m-%07d.json", j), Ino: inos[j],
				Consumer: "c-1@h", Size: 10, Reject: rej, Claimed: at, At: at.Add(time.Duration(j) * time.Millisecond)})
		}
		if _, err := l.Consumer().Record(ctx, b, spool.Work{}); err != nil {
			tb.Fatal(err)
		}
	}
	for j := range n {
		if j%50 == 0 {
			if err := l.Replays().Record(ctx, ledger.Replay{File: fmt.Sprintf("m-%07d.json", j), NewName: fmt.Sprintf("m-%07d.json", j),
				Ino: inos[j], By: "op", At: at.Add(time.Hour * 24 * 365)}); err != nil {
				tb.Fatal(err)
			}
			if err := os.Remove(filepath.Join(path, "error", fmt.Sprintf("m-%07d.json", j))); err != nil {
				tb.Fatal(err)
			}
		} else {
			current++
		}
	}
	tk, err := task.ParseTokens(strings.NewReader("vic viewer " + hash("v") + "\n"))
	if err != nil {
		tb.Fatal(err)
	}
	svc := &task.Service{Dir: d, Ledger: l, Contract: spool.DefaultContract(), Policy: task.NoPolicy}
	s, err := New(Options{Dir: d, Ledger: l, Tokens: tk, Tasks: svc})
	if err != nil {
		tb.Fatal(err)
	}
	mux := http.NewServeMux()
	s.Register(mux)
	return mux, current
}

// get serves GET path as the viewer and decodes the answer into v.
func get(tb testing.TB, h http.Handler, path string, v any) {
	tb.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer v")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		tb.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		tb.Fatalf("GET %s: %v", path, err)
	}
}

type page struct {
	Items []DeadLetterJSON `json:"items"`
	Next  *string          `json:"next"`
}

// TestDeadLetterPages: keyset pages over the ledger list every current
// dead letter once, newest first, and no replayed one; a filtered page
// holds only what the filter keeps; the groups count them all.
func TestDeadLetterPages(t *testing.T) {
	h, current := scaleQueue(t, 3000)
	seen := map[string]bool{}
	last := int64(1 << 62)
	for cursor := ""; ; {
		var p page
		get(t, h, "/api/v1/dead-letters?limit=500"+cursor, &p)
		for _, it := range p.Items {
			if seen[it.File] || it.ID >= last {
				t.Fatalf("%s (id %d) out of order or twice", it.File, it.ID)
			}
			seen[it.File], last = true, it.ID
			if n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(it.File, "m-"), ".json")); n%50 == 0 {
				t.Errorf("%s was replayed: listed", it.File)
			}
		}
		if p.Next == nil {
			break
		}
		cursor = "&cursor=" + *p.Next
	}
	if len(seen) != current {
		t.Errorf("pages listed %d dead letters, want %d", len(seen), current)
	}

	var p page
	get(t, h, "/api/v1/dead-letters?reason=handler&q=o-2999&limit=10", &p)
	if len(p.Items) != 1 || p.Items[0].File != "m-0002999.json" || p.Next != nil {
		t.Errorf("filtered page: %+v", p)
	}
	get(t, h, "/api/v1/dead-letters?reason=missing-field&limit=500", &p)
	for _, it := range p.Items {
		if it.Reason != "missing-field" {
			t.Errorf("reason filter gave %s of reason %s", it.File, it.Reason)
		}
	}
	var g struct {
		Groups []struct {
			Reason, Signature string
			Count             int
		}
	}
	get(t, h, "/api/v1/dead-letters/groups", &g)
	total := 0
	for _, gr := range g.Groups {
		total += gr.Count
	}
	if total != current || len(g.Groups) != 3 {
		t.Errorf("groups %+v: %d dead letters in %d groups, want %d in 3 (one signature per reason)", g.Groups, total, len(g.Groups), current)
	}
}

// BenchmarkDeadLetterPages measures the API over 100 000 dead letters
// (SPOOL_BENCH_DEAD_LETTERS=1000000 for a million): the first page, a
// page filtered by reason and text, and the groups. docs/PERFORMANCE.md
// quotes it.
func BenchmarkDeadLetterPages(b *testing.B) {
	n := 100_000
	if v := os.Getenv("SPOOL_BENCH_DEAD_LETTERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("SPOOL_BENCH_DEAD_LETTERS=%q: want a number", v)
		}
	}
	h, _ := scaleQueue(b, n)
	for _, c := range []struct{ name, path string }{
		{"first-page", "/api/v1/dead-letters?limit=50"},
		{"filtered-page", "/api/v1/dead-letters?reason=handler&q=503&limit=50"},
		{"groups", "/api/v1/dead-letters/groups"},
	} {
		b.Run(fmt.Sprintf("%s/n=%d", c.name, n), func(b *testing.B) {
			for b.Loop() {
				var v map[string]any
				get(b, h, c.path, &v)
			}
		})
	}
}

package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
)

// serveFrom answers one request from client (its TCP peer's address).
func serveFrom(h http.Handler, client, method, target, token string, body string) *httptest.ResponseRecorder {
	var req *http.Request
	if body != "" {
		req = httptest.NewRequest(method, target, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(method, target, nil)
	}
	req.RemoteAddr = client + ":40000"
	if strings.Contains(client, ":") {
		req.RemoteAddr = "[" + client + "]:40000"
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// refusedRow is an audit row of a refusal, as the folding tests read it.
type refusedRow struct {
	ledger.AuditRow
	client, path string
	refused      int64
}

func refusedRows(t *testing.T, l *ledger.DB) []refusedRow {
	t.Helper()
	rows, err := l.Audit().List(t.Context(), ledger.AuditQuery{Outcome: ledger.AuditRefused})
	if err != nil {
		t.Fatal(err)
	}
	var out []refusedRow
	for _, r := range rows {
		var sel map[string]string
		if err := json.Unmarshal([]byte(r.Selection), &sel); err != nil {
			t.Fatalf("row %d: selection %s: %v", r.ID, r.Selection, err)
		}
		out = append(out, refusedRow{r, sel["client"], sel["path"], r.Counts["refused"]})
	}
	return out
}

// TestRefusalsFolded: repeated refusals of one client, action and reason
// are one row at once and one row a window with their count; the counts
// add up to the refusals, every row names its client, a folded row spans
// the refusals it counts, and the clients over the cap of keys are
// folded under "other addresses". Close writes what is held.
func TestRefusalsFolded(t *testing.T) {
	s, l := newTestConsole(t)
	const window, keys = time.Second, 4
	s.folds = newFolder(window, keys, s.writeFolded)
	mux := http.NewServeMux()
	s.Register(mux)

	type key struct{ client, reason string }
	sent := map[key]int64{}
	send := func(client, token string, n int) {
		reason := "no token (401)"
		if token != "" {
			reason = "unknown token (401)"
		}
		for range n {
			if w := serveFrom(mux, client, "GET", "/api/v1/tasks", token, ""); w.Code != 401 {
				t.Fatalf("GET /api/v1/tasks from %s with %q: %d, want 401", client, token, w.Code)
			}
			sent[key{client, reason}]++
		}
	}
	start := time.Now()
	send("192.0.2.1", "", 1000)
	send("192.0.2.1", "wrong", 300)
	send("192.0.2.2", "", 500)
	// The first of each key is written at once; the others wait for the
	// window's end, unless it came while the test sent (a loaded machine
	// under -race), which the counts below still check.
	if rows := refusedRows(t, l); time.Since(start) < window && len(rows) != 3 {
		t.Fatalf("%d rows written at once, want 3 (one a key): %+v", len(rows), rows)
	}
	// Clients over the cap: folded under other addresses.
	for i := range 10 {
		send(fmt.Sprintf("198.51.100.%d", i+1), "", 20)
	}
	// Unless the window ended while the test sent (then the keys were
	// free again), some of them found no key free.
	capped := time.Since(start) < window
	// The window ends: each key's row with its count, the timer's.
	total := func() (n int64) {
		for _, r := range refusedRows(t, l) {
			n += r.refused
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for total() < 2000 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := total(); n != 2000 {
		t.Fatalf("the window's end: rows count %d refusals, want 2000", n)
	}
	// More in the next window, written by Close.
	send("192.0.2.1", "", 100)
	s.folds.close()
	end := time.Now()

	rows := refusedRows(t, l)
	for _, r := range rows {
		t.Logf("%d %s..%s %s %s %s %v %s", r.ID, r.At.Format("05.000"), r.Ended.Format("05.000"), r.Actor, r.Action, r.Selection, r.Counts, r.Detail)
	}
	got := map[key]int64{}
	var other int64
	for _, r := range rows {
		if r.Actor != "-" || r.Action != "read" || r.path != "/api/v1/tasks" || r.refused < 1 {
			t.Errorf("row %d: %s %s %s path %q refused %d; want - read /api/v1/tasks with a count", r.ID, r.Actor, r.Action, r.Outcome, r.path, r.refused)
		}
		if r.At.Before(start) || r.Ended.Before(r.At) || r.Ended.After(end) {
			t.Errorf("row %d spans %v to %v, want within the test's %v to %v", r.ID, r.At, r.Ended, start, end)
		}
		if r.refused > 1 && !strings.Contains(r.Detail, fmt.Sprintf("refused %d times more", r.refused)) {
			t.Errorf("row %d of %d refusals: detail %q", r.ID, r.refused, r.Detail)
		}
		reason, _ := reasonOf(r.Detail)
		if r.client == otherClients {
			other += r.refused
			continue
		}
		got[key{r.client, reason}] += r.refused
	}
	var overflow int64
	for k, n := range sent {
		if strings.HasPrefix(k.client, "198.51.100.") {
			overflow += n
			continue
		}
		if got[k] != n {
			t.Errorf("%s %s: rows count %d refusals, want %d", k.client, k.reason, got[k], n)
		}
	}
	// The clients over the cap: those that found a key free count as
	// themselves, the rest as other addresses.
	var own int64
	for k, n := range got {
		if strings.HasPrefix(k.client, "198.51.100.") {
			own += n
		}
	}
	if own+other != overflow || capped && other == 0 {
		t.Errorf("clients over the cap: %d refusals counted as their own and %d as %s, want %d in all, some as %s",
			own, other, otherClients, overflow, otherClients)
	}
	// 4 keys and the overflow's, each once at once and once folded, and
	// 192.0.2.1 once more at Close: 11, more if a window ended while the
	// test sent.
	if len(rows) > 20 {
		t.Errorf("%d rows for 2100 refusals, want at most 20", len(rows))
	}
	// After Close, a refusal is written at once.
	send("192.0.2.3", "", 2)
	if n := len(refusedRows(t, l)); n != len(rows)+2 {
		t.Errorf("2 refusals after Close: %d rows more, want 2", n-len(rows))
	}
}

// TestRefusalsEveryRoute: a refusal on any route, a read's included, is
// a row naming its client: 401 and 404 under /api/, 405, a logout
// without a session, a bad parameter.
func TestRefusalsEveryRoute(t *testing.T) {
	s, l := newTestConsole(t)
	mux := http.NewServeMux()
	s.Register(mux)
	for _, c := range []struct {
		client, method, target, token, body string
		code                                int
		action, reason                      string
	}{
		{"192.0.2.1", "GET", "/api/v1/overview", "", "", 401, "read", "no token (401)"},
		{"192.0.2.2", "GET", "/api/v1/audit", "wrong", "", 401, "read", "unknown token (401)"},
		{"192.0.2.3", "GET", "/api/v1/nothing", "v", "", 404, "read", "not found (404)"},
		{"192.0.2.3", "DELETE", "/api/v1/tasks/1", "o", "", 404, "request", "not found (404)"},
		{"192.0.2.4", "GET", "/api/v1/audit?limit=0", "v", "", 400, "read", "bad request (400)"},
		{"192.0.2.4", "GET", "/api/v1/tasks/x", "v", "", 404, "read", "not found (404)"},
		{"192.0.2.5", "GET", "/login", "", "", 405, "login", "method not allowed (405)"},
		{"192.0.2.5", "PUT", "/", "", "", 405, "read", "method not allowed (405)"},
		{"192.0.2.6", "POST", "/logout", "", "", 403, "logout", "no live session (403)"},
		{"2001:db8::7", "POST", "/api/v1/replays", "v", "", 403, "replay", "role too low (403)"},
		{"192.0.2.8", "POST", "/api/v1/replays", "o", "{", 400, "replay", "bad request (400)"},
		{"192.0.2.8", "POST", "/api/v1/discards", "o", `{"dry_run": true}`, 400, "discard", "bad request (400)"},
		{"192.0.2.9", "POST", "/api/v1/tasks/x/approve", "a", "", 404, "approve", "not found (404)"},
		{"192.0.2.9", "POST", "/api/v1/tasks/x/cancel", "o", "", 404, "cancel", "not found (404)"},
	} {
		before := len(refusedRows(t, l))
		if w := serveFrom(mux, c.client, c.method, c.target, c.token, c.body); w.Code != c.code {
			t.Errorf("%s %s as %q: %d, want %d", c.method, c.target, c.token, w.Code, c.code)
			continue
		}
		rows := refusedRows(t, l)
		if len(rows) != before+1 {
			t.Errorf("%s %s as %q: %d rows, want 1", c.method, c.target, c.token, len(rows)-before)
			continue
		}
		r := rows[len(rows)-1]
		if reason, _ := reasonOf(r.Detail); r.client != c.client || r.Action != c.action || reason != c.reason || r.refused != 1 {
			t.Errorf("%s %s as %q: row client %q action %q detail %q refused %d; want %q %q %q 1",
				c.method, c.target, c.token, r.client, r.Action, r.Detail, r.refused, c.client, c.action, c.reason)
		}
	}
}

// TestLoginRateLimit: sign-ins from one address over loginBurst at once
// are 429 with Retry-After, the right token's too, and audited; another
// address has its own limiter, an IPv6 address shares its /64's.
func TestLoginRateLimit(t *testing.T) {
	s, l := newTestConsole(t)
	mux := http.NewServeMux()
	s.Register(mux)
	login := func(client, token string) *httptest.ResponseRecorder {
		return serveFrom(mux, client, "POST", "/login", "", url.Values{"token": {token}}.Encode())
	}
	for _, client := range []string{"192.0.2.1", "2001:db8:1:2::1"} {
		start := time.Now()
		n := 0
		for ; n < 100; n++ {
			if w := login(client, "wrong"); w.Code == http.StatusTooManyRequests {
				if ra := w.Header().Get("Retry-After"); ra != "1" {
					t.Errorf("%s: 429 with Retry-After %q, want 1", client, ra)
				}
				break
			} else if w.Code != 401 {
				t.Fatalf("%s: sign-in %d: %d, want 401", client, n+1, w.Code)
			}
		}
		if allowed := loginBurst + int(time.Since(start).Seconds()*loginRate); n < loginBurst || n > allowed {
			t.Errorf("%s: %d sign-ins before a 429, want %d to %d", client, n, loginBurst, allowed)
		}
		if w := login(client, "o"); w.Code != http.StatusTooManyRequests {
			t.Errorf("%s: the right token over the limit: %d, want 429", client, w.Code)
		}
	}
	if w := login("2001:db8:1:2::2", "o"); w.Code != http.StatusTooManyRequests {
		t.Errorf("another address of the /64: %d, want 429", w.Code)
	}
	if w := login("192.0.2.2", "o"); w.Code != http.StatusSeeOther {
		t.Errorf("another address: %d, want 303 (signed in)", w.Code)
	}
	var reasons []string
	for _, r := range refusedRows(t, l) {
		reason, _ := reasonOf(r.Detail)
		reasons = append(reasons, r.client+" "+r.Action+" "+reason)
	}
	want := "192.0.2.1 login unknown token (401)|192.0.2.1 login too many sign-ins (429)|" +
		"2001:db8:1:2::1 login unknown token (401)|2001:db8:1:2::1 login too many sign-ins (429)|2001:db8:1:2::2 login too many sign-ins (429)"
	if got := strings.Join(reasons, "|"); got != want {
		t.Errorf("refusal rows:\n%s\nwant\n%s", strings.ReplaceAll(got, "|", "\n"), strings.ReplaceAll(want, "|", "\n"))
	}
}

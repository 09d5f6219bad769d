//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// The control plane under abuse: a flood of refused requests, a sign-in
// loop, idle and slow connections by the hundred. Each client of these
// tests has a loopback address of its own (all of 127.0.0.0/8 reaches a
// listener on 127.0.0.1 on Linux), as each would on a network.

// The limits docs/OPERATIONS.md states.
const (
	loginBurst, loginRate = 5, 2 // sign-ins at once and a second, per address
	maxRowsPerKey         = 4    // refusal rows of a key in a test under a minute
)

// clientFrom is an HTTP client whose connections come from the loopback
// address from, giving up on a request after timeout; it follows no
// redirect.
func clientFrom(from string, timeout time.Duration) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: timeout}
	return &http.Client{
		Timeout:       timeout,
		Transport:     &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 2},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// signIn posts token to base's /login with c, and returns the answer's
// status, its Retry-After and its session cookie (nil when none).
func signIn(t *testing.T, c *http.Client, base, token string) (int, string, *http.Cookie) {
	t.Helper()
	res, err := c.PostForm(base+"/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatalf("POST /login: %v", err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	for _, ck := range res.Cookies() {
		if ck.Name == "spool_session" {
			return res.StatusCode, res.Header.Get("Retry-After"), ck
		}
	}
	return res.StatusCode, res.Header.Get("Retry-After"), nil
}

// refusalRow is a refused row of spool audit --json.
type refusalRow struct {
	ID        int64
	At        time.Time
	EndedAt   time.Time `json:"ended_at"`
	Actor     string
	Action    string
	Outcome   string
	Selection map[string]any // a policy row's holds objects
	Counts    map[string]int64
	Detail    string
}

// sel is the selection's text value of key, "" when it has none.
func (r refusalRow) sel(key string) string {
	s, _ := r.Selection[key].(string)
	return s
}

// reason is the part of the row's detail its refusals fold by.
func (r refusalRow) reason() string {
	reason, _, _ := strings.Cut(r.Detail, ": ")
	return reason
}

// refusalRows are the refused rows of q's audit after row id after.
func refusalRows(t *testing.T, q string, after int64) []refusalRow {
	t.Helper()
	var rows []refusalRow
	if err := json.Unmarshal([]byte(mustRun(t, 0, "audit", q, "--json").stdout), &rows); err != nil {
		t.Fatal(err)
	}
	var out []refusalRow
	for _, r := range rows {
		if r.ID > after && r.Outcome == "refused" {
			out = append(out, r)
		}
	}
	return out
}

// stopServe ends p with SIGTERM and wants exit 0; it returns its stderr.
func stopServe(t *testing.T, p *proc) string {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.code != 0 {
		t.Fatalf("after SIGTERM: want exit 0\n%s", r)
	}
	return r.stderr
}

// TestConsoleRefusalFlood: 20 000 sign-ins with a wrong token, from four
// goroutines on two addresses as fast as they go, are all refused (401,
// or 429 over the rate) and leave a bounded number of audit rows, at most
// maxRowsPerKey for each address and reason, each naming its client and
// counting its refusals, the counts adding up to the refusals of each
// address and reason; a row folding many spans them. A refused read
// (GET /api/v1/tasks without a token, with an unknown one) is audited
// alike.
func TestConsoleRefusalFlood(t *testing.T) {
	t.Parallel()
	q, base, p := consoleServe(t, 1, 1)
	before := refusalRows(t, q, 0)
	var last int64
	if len(before) > 0 {
		last = before[len(before)-1].ID
	}
	const flood, workers = 20000, 4
	addrs := []string{"127.0.0.2", "127.0.0.3"}
	type key struct{ client, reason string }
	var (
		mu   sync.Mutex
		sent = map[key]int64{}
		wg   sync.WaitGroup
	)
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			client := addrs[w%len(addrs)]
			c := clientFrom(client, 30*time.Second)
			mine := map[key]int64{}
			for i := range flood / workers {
				code, retry, _ := signIn(t, c, base, fmt.Sprintf("guess-%d-%d", w, i))
				switch {
				case code == http.StatusUnauthorized:
					mine[key{client, "unknown token (401)"}]++
				case code == http.StatusTooManyRequests && retry != "":
					mine[key{client, "too many sign-ins (429)"}]++
				default:
					t.Errorf("a wrong token from %s: %d, Retry-After %q; want 401, or 429 with Retry-After", client, code, retry)
					return
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for k, n := range mine {
				sent[k] += n
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	reader := clientFrom("127.0.0.4", 30*time.Second)
	for _, token := range []string{"", "", "", "not-a-token", "not-a-token"} {
		req, _ := http.NewRequest("GET", base+"/api/v1/tasks", nil)
		reason := "no token (401)"
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
			reason = "unknown token (401)"
		}
		res, err := reader.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 401 {
			t.Fatalf("GET /api/v1/tasks with %q: %d, want 401", token, res.StatusCode)
		}
		sent[key{"127.0.0.4", reason}]++
	}
	stopServe(t, p) // writes the refusals held
	end := time.Now()
	t.Logf("%d sign-ins in %v: %v", flood, elapsed.Round(time.Millisecond), sent)

	for _, a := range addrs {
		// Rate limited: the tries let through are those of the burst and
		// the rate, the right token's included.
		if n, most := sent[key{a, "unknown token (401)"}], int64(loginBurst+loginRate*elapsed.Seconds()+1); n > most {
			t.Errorf("%s: %d sign-ins tried in %v, want at most %d (%d at once, %d a second)", a, n, elapsed, most, loginBurst, loginRate)
		}
		if sent[key{a, "too many sign-ins (429)"}] == 0 {
			t.Errorf("%s: no 429 in %d sign-ins", a, flood/len(addrs))
		}
	}
	rows := refusalRows(t, q, last)
	t.Logf("%d audit rows for the refusals of %d keys", len(rows), len(sent))
	if len(rows) > maxRowsPerKey*len(sent) {
		t.Errorf("%d audit rows for %d refusals, want at most %d (%d keys)", len(rows), flood+5, maxRowsPerKey*len(sent), len(sent))
	}
	got := map[key]int64{}
	bad := 0
	for _, r := range rows {
		client := r.sel("client")
		n := r.Counts["refused"]
		got[key{client, r.reason()}] += n
		if bad++; bad > 5 {
			continue // a broken fold breaks them all: the first few say how
		}
		switch {
		case r.Actor != "-" || n < 1:
			t.Errorf("row %d: actor %q, %d refused; want - and a count: %+v", r.ID, r.Actor, n, r)
		case r.At.Before(start.Add(-time.Second)) || r.EndedAt.Before(r.At) || r.EndedAt.After(end.Add(time.Second)):
			t.Errorf("row %d spans %v to %v, want within the test's %v to %v", r.ID, r.At, r.EndedAt, start, end)
		case n > 1 && !strings.Contains(r.Detail, fmt.Sprintf("refused %d times more", n)):
			t.Errorf("row %d folds %d refusals: detail %q does not say so", r.ID, n, r.Detail)
		case client == "127.0.0.4" && (r.Action != "read" || r.sel("path") != "/api/v1/tasks"):
			t.Errorf("row %d of a refused read: action %q path %q, want read /api/v1/tasks", r.ID, r.Action, r.sel("path"))
		case client != "127.0.0.4" && r.Action != "login":
			t.Errorf("row %d of a refused sign-in: action %q", r.ID, r.Action)
		default:
			bad--
		}
	}
	for k, n := range sent {
		if got[k] != n {
			t.Errorf("%s %s: %d refusals, the audit counts %d", k.client, k.reason, n, got[k])
		}
	}
	for k := range got {
		if _, ok := sent[k]; !ok {
			t.Errorf("audit rows of %s %s, which was not sent", k.client, k.reason)
		}
	}
	if t.Failed() && len(rows) < 50 {
		for _, r := range rows {
			t.Logf("%d %v..%v %s %s %v %v %s", r.ID, r.At, r.EndedAt, r.Actor, r.Action, r.Selection, r.Counts, r.Detail)
		}
	}
}

// TestConsoleLoginRateLimit: an address that tries to sign in more than
// loginBurst times at once is answered 429 with Retry-After, its right
// token too, and the 429 is audited with the address; another address
// signs in meanwhile, and the first does once Retry-After has passed.
func TestConsoleLoginRateLimit(t *testing.T) {
	t.Parallel()
	q, base, _ := consoleServe(t, 0, 1)
	c := clientFrom("127.0.0.5", 10*time.Second)
	start := time.Now()
	tries := 0
	var retry string
	for ; tries < 100; tries++ {
		code, ra, _ := signIn(t, c, base, "wrong")
		if code == http.StatusTooManyRequests {
			retry = ra
			break
		}
		if code != http.StatusUnauthorized {
			t.Fatalf("sign-in %d with a wrong token: %d, want 401", tries+1, code)
		}
	}
	if allowed := loginBurst + int(time.Since(start).Seconds()*loginRate); tries < loginBurst || tries > allowed {
		t.Fatalf("%d sign-ins answered before a 429, want %d to %d", tries, loginBurst, allowed)
	}
	secs, err := strconv.Atoi(retry)
	if err != nil || secs < 1 || secs > 2 {
		t.Errorf("429 with Retry-After %q, want 1 or 2 (seconds)", retry)
	}
	if code, _, ck := signIn(t, c, base, "olga-token"); code != http.StatusTooManyRequests || ck != nil {
		t.Errorf("the right token over the limit: %d (cookie %v), want 429 and no session", code, ck)
	}
	if code, _, ck := signIn(t, clientFrom("127.0.0.6", 10*time.Second), base, "olga-token"); code != http.StatusSeeOther || ck == nil {
		t.Errorf("another address, meanwhile: %d (cookie %v), want 303 with a session", code, ck)
	}
	waitFor(t, 10*time.Second, "the limit to let 127.0.0.5 sign in again", func() bool {
		code, _, _ := signIn(t, c, base, "olga-token")
		if code != http.StatusSeeOther && code != http.StatusTooManyRequests {
			t.Fatalf("the right token: %d", code)
		}
		return code == http.StatusSeeOther
	})
	if waited := time.Since(start); waited < time.Duration(secs)*time.Second/2 {
		t.Errorf("signed in again %v after the first try, before the Retry-After of %d s", waited, secs)
	}
	var rows []string
	for _, r := range refusalRows(t, q, 0) {
		rows = append(rows, r.sel("client")+" "+r.Action+" "+r.reason())
	}
	if want := "127.0.0.5 login unknown token (401)|127.0.0.5 login too many sign-ins (429)"; strings.Join(rows, "|") != want {
		t.Errorf("refusal rows %q, want %q", rows, want)
	}
}

// siege holds idle and slow connections open to a listener: idle ones
// that made one request and keep the connection, slow ones that trickle
// a byte at a time their headers (slowloris) or, every other one, the
// body of a sign-in (which its handler waits for). A connection the server
// closes (its timeouts, its caps) is opened again after a second, as a
// determined client would, until stop.
type siege struct {
	addr  string
	stop  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]bool
	dials chan struct{} // one per first dial returned
}

// besiege opens idle and slow connections to addr, spread over the
// loopback addresses of from, and returns once each has been dialed
// once. The test's end stops them.
func besiege(t *testing.T, addr string, from []string, idle, slow int) *siege {
	s := &siege{addr: addr, stop: make(chan struct{}), conns: map[net.Conn]bool{}, dials: make(chan struct{}, idle+slow)}
	for i := range idle + slow {
		s.wg.Go(func() { s.hold(from[i%len(from)], i < idle, i%2 == 1) })
	}
	t.Cleanup(s.end)
	for range idle + slow {
		select {
		case <-s.dials:
		case <-time.After(cmdTimeout):
			t.Fatalf("%d connections not dialed within %v", idle+slow, cmdTimeout)
		}
	}
	return s
}

func (s *siege) end() {
	s.mu.Lock()
	select {
	case <-s.stop:
	default:
		close(s.stop)
		for c := range s.conns {
			c.Close()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// hold keeps one connection from from open, idle or slow (in its
// body when body), until stop.
func (s *siege) hold(from string, idle, body bool) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	first := true
	for {
		c, err := d.Dial("tcp", s.addr)
		if first {
			s.dials <- struct{}{}
			first = false
		}
		if err == nil {
			s.mu.Lock()
			select {
			case <-s.stop: // end closed the others already
				s.mu.Unlock()
				c.Close()
				return
			default:
			}
			s.conns[c] = true
			s.mu.Unlock()
			if idle {
				s.idle(c)
			} else {
				s.slow(c, body)
			}
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		}
		select {
		case <-s.stop:
			return
		case <-time.After(time.Second):
		}
	}
}

// idle makes one request on c and waits until c is closed.
func (s *siege) idle(c net.Conn) {
	if _, err := fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: spool\r\n\r\n"); err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, c) // the answer, then nothing until closed
}

// slow sends a request's headers on c a byte every 200 ms until c is
// closed, or with body the headers of a sign-in at once and its body so.
func (s *siege) slow(c net.Conn, body bool) {
	head := "GET /metrics HTTP/1.1\r\nHost: spool\r\n"
	if body {
		head = "POST /login HTTP/1.1\r\nHost: spool\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 4000\r\n\r\ntoken="
	}
	for i := 0; ; i++ {
		b := "x"
		switch {
		case body && i == 0:
			b = head
		case body:
		case i < len(head):
			b = head[i : i+1]
		case i == len(head):
			b = "X-Slow: "
		}
		if _, err := io.WriteString(c, b); err != nil {
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		var buf [512]byte
		if _, err := c.Read(buf[:]); err == nil {
			return // an answer (408, 431): closed after it
		} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			return
		}
	}
}

// TestControlPlaneUnderSiege: with 200 idle and 200 slow connections open,
// from a few addresses or from many, /metrics and /healthz of serve and
// of consume --listen, and serve's console for a signed-in operator,
// answer within a second (two under the race detector), again and again while the
// connections are opened anew.
func TestControlPlaneUnderSiege(t *testing.T) {
	t.Parallel()
	few := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}
	var many []string
	for i := range 200 {
		many = append(many, fmt.Sprintf("127.0.%d.%d", 1+i/100, 1+i%100))
	}
	checks := testenv.Pick(12*time.Second, 3*time.Second)
	for _, cmd := range []string{"serve", "consume"} {
		for _, from := range []struct {
			name  string
			addrs []string
		}{{"few", few}, {"many", many}} {
			// One at a time: each opens 400 connections on a machine of
			// two cores.
			t.Run(cmd+"/"+from.name, func(t *testing.T) {
				var (
					p      *proc
					base   string
					cookie *http.Cookie
				)
				if cmd == "serve" {
					_, base, p = consoleServe(t, 1, 1)
					var code int
					if code, _, cookie = signIn(t, clientFrom("127.0.0.1", 10*time.Second), base, "olga-token"); cookie == nil {
						t.Fatalf("sign-in: %d, no session", code)
					}
				} else {
					q := filepath.Join(t.TempDir(), "q")
					mustRun(t, 0, "init", q)
					p, base = startListening(t, "consume", q, "--watch", "--exec", "cat >/dev/null", "--listen", "127.0.0.1:0")
				}
				s := besiege(t, strings.TrimPrefix(base, "http://"), from.addrs, 200, 200)
				// Each answer within a second; the race detector's build
				// of the server is given two.
				limit := time.Second
				if raceSpool() {
					limit = 2 * time.Second
				}
				var slowest time.Duration
				start := time.Now()
				for round := 1; round == 1 || time.Since(start) < checks; round++ {
					paths := []string{"/metrics", "/healthz"}
					if cmd == "serve" {
						paths = append(paths, "/", "/api/v1/overview")
					}
					for _, path := range paths {
						// A new client each time: a new connection, which the
						// siege must not keep out.
						c := clientFrom("127.0.0.1", limit)
						req, _ := http.NewRequest("GET", base+path, nil)
						if cookie != nil {
							req.AddCookie(cookie)
						}
						asked := time.Now()
						res, err := c.Do(req)
						if err != nil {
							t.Fatalf("round %d, GET %s under siege: %v (after %v)", round, path, err, time.Since(asked).Round(time.Millisecond))
						}
						body, err := io.ReadAll(res.Body)
						res.Body.Close()
						slowest = max(slowest, time.Since(asked))
						if err != nil || res.StatusCode != 200 {
							t.Fatalf("round %d, GET %s under siege: %d %v", round, path, res.StatusCode, err)
						}
						if path == "/" && !strings.Contains(string(body), `<meta name="csrf"`) {
							t.Fatalf("round %d, GET / under siege: not the signed-in console:\n%s", round, body)
						}
						c.CloseIdleConnections()
					}
					time.Sleep(200 * time.Millisecond) // the pace of a monitor, not a wait for a result
				}
				s.end()
				t.Logf("the slowest answer under siege took %v (limit %v)", slowest.Round(time.Millisecond), limit)
				stderr := stopServe(t, p)
				// From a few addresses their cap closes the rest; from
				// many, the 400 fit under the cap of all (512) beside the
				// checks, and none is closed (TestEndpointConnectionCap
				// has the cap of all).
				if want := "too many connections from one address"; from.name == "few" && !strings.Contains(stderr, want) {
					t.Errorf("%s logged no %q:\n%s", cmd, want, stderr)
				}
				if bad := "connection limit reached"; from.name == "many" && strings.Contains(stderr, bad) {
					t.Errorf("%s logged %q for 400 connections:\n%s", cmd, bad, stderr)
				}
			})
		}
	}
}

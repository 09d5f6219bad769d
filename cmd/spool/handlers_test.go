package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// stmt is what TestSplitSQL compares of a statement.
type stmt struct {
	text   string
	line   int
	params []string
}

func TestSplitSQL(t *testing.T) {
	for _, tt := range []struct {
		name string
		src  string
		want []stmt
	}{
		{"one without semicolon", "SELECT :msg_id", []stmt{{"SELECT :msg_id", 1, []string{"msg_id"}}}},
		{"two, blank lines and comments", "-- header; not a statement\n\nINSERT INTO a VALUES (:x, @y, $z);\n/* ; */ UPDATE b SET n = n + 1 WHERE k = :x;\n-- trailer",
			[]stmt{
				{"INSERT INTO a VALUES (:x, @y, $z)", 3, []string{"x", "y", "z"}},
				{"UPDATE b SET n = n + 1 WHERE k = :x", 4, []string{"x"}},
			}},
		{"semicolons and markers in literals", "INSERT INTO t VALUES ('a;b', 'it''s :not', \"c;:d\", `e;`, [f;])",
			[]stmt{{"INSERT INTO t VALUES ('a;b', 'it''s :not', \"c;:d\", `e;`, [f;])", 1, nil}}},
		{"multi-line literal keeps line numbers", "SELECT 'a\nb';\nSELECT :seq",
			[]stmt{{"SELECT 'a\nb'", 1, nil}, {"SELECT :seq", 3, []string{"seq"}}}},
		{"each parameter once, in order", "SELECT :b, :a, :b, :été", []stmt{{"SELECT :b, :a, :b, :été", 1, []string{"b", "a", "été"}}}},
		{"dollar inside an identifier", "SELECT a$b FROM t WHERE k = $k", []stmt{{"SELECT a$b FROM t WHERE k = $k", 1, []string{"k"}}}},
		{"PostgreSQL cast and dollar quotes", "SELECT :amount::numeric, $$a;:b$$, $q$c;$q$;\nSELECT 1",
			[]stmt{{"SELECT :amount::numeric, $$a;:b$$, $q$c;$q$", 1, []string{"amount"}}, {"SELECT 1", 2, nil}}},
		{"empty statements dropped", ";;\n ; -- x\n", nil},
		{"a lone colon", "SELECT ':' || x FROM t WHERE y = : ", []stmt{{"SELECT ':' || x FROM t WHERE y = :", 1, nil}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stmts, err := splitSQL(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			var got []stmt
			for _, s := range stmts {
				got = append(got, stmt{s.text, s.line, s.params})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("splitSQL(%q)\n got %#v\nwant %#v", tt.src, got, tt.want)
			}
		})
	}
}

func TestBindSQL(t *testing.T) {
	stmts, err := splitSQL("-- c\n  INSERT INTO t VALUES (:b, @a, ':x', $b, :amount::numeric)")
	if err != nil || len(stmts) != 1 {
		t.Fatalf("%v %v", stmts, err)
	}
	if got, want := stmts[0].bind(ledger.SQLite()), "INSERT INTO t VALUES (?1, ?2, ':x', ?1, ?3::numeric)"; got != want {
		t.Errorf("SQLite: %q, want %q", got, want)
	}
	if got, want := stmts[0].bind(ledger.PostgreSQL()), "INSERT INTO t VALUES ($1, $2, ':x', $1, $3::numeric)"; got != want {
		t.Errorf("PostgreSQL: %q, want %q", got, want)
	}
}

func TestSplitSQLRefuses(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"SELECT 'abc;\n", "line 1: unterminated '"},
		{"SELECT 1;\nSELECT \"x", "line 2: unterminated \""},
		{"SELECT 1 /* no end", "line 1: unterminated /* comment"},
		{"SELECT 1;\n\nSELECT * FROM t WHERE a = ?", "line 3: positional parameter ?"},
		{"SELECT :_x", "parameter :_x: a name must begin with a letter"},
		{"SELECT :1", "parameter :1: a name must begin with a letter"},
		{"SELECT $1", "parameter $1: a name must begin with a letter (positional parameters are not supported)"},
		{"SELECT $q$abc", "line 1: unterminated $q$ string"},
	} {
		_, err := splitSQL(tt.src)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("splitSQL(%q) = %v, want an error containing %q", tt.src, err, tt.want)
		}
	}
}

func TestSQLParam(t *testing.T) {
	m, err := spool.DefaultContract().Parse([]byte(`{"msg_id":"m1","order_no":"O","seq":3,"amount":12.50,` +
		`"customer":"Zo\u00eb \"Z\"","items":[1,{"a":2}],"paid":true,"note":null,"n":7}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		want any
	}{
		{"msg_id", "m1"}, {"order_no", "O"}, {"seq", int64(3)}, {"amount", "12.50"},
		{"file", "a.json"}, {"payload", string(m.Raw)},
		{"customer", `Zoë "Z"`}, {"items", `[1,{"a":2}]`}, {"paid", "true"}, {"n", "7"},
		{"note", nil}, {"absent", nil},
	} {
		got, err := sqlParam(tt.name, m, "a.json")
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf(":%s = %#v, %v; want %#v", tt.name, got, err, tt.want)
		}
	}
	// Absent optional contract fields are NULL, not "" or 0.
	m = &spool.Message{MsgID: "k", Raw: []byte(`{"msg_id":"k"}`)}
	for _, name := range []string{"order_no", "seq", "amount", "file"} {
		if got, _ := sqlParam(name, m, ""); got != nil {
			t.Errorf(":%s of a message without it = %#v, want NULL", name, got)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{" 120 ", 2 * time.Minute, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"Sun, 01 Mar 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Sunday, 01-Mar-26 12:01:00 GMT", time.Minute, true},
		{"Sun, 01 Mar 2026 11:00:00 GMT", 0, true}, // in the past: now
		{"99999999999999999", 365 * 24 * time.Hour, true},
	} {
		got, ok := parseRetryAfter(tt.v, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.v, got, ok, tt.want, tt.ok)
		}
	}
}

func TestTailText(t *testing.T) {
	tb := &tailBuffer{max: 8}
	fmt.Fprint(tb, "first line\n")
	fmt.Fprint(tb, "last\n")
	if got := tb.text(100); got != "...ne\nlast" {
		t.Errorf("tail = %q", got)
	}
	big := &tailBuffer{max: 4}
	fmt.Fprint(big, "0123456789")
	if got := big.text(100); got != "...6789" {
		t.Errorf("tail of one big write = %q", got)
	}
	small := &tailBuffer{max: 100}
	fmt.Fprint(small, "  ok \n")
	if got := small.text(100); got != "ok" {
		t.Errorf("tail = %q", got)
	}
	// Cut inside a rune: no half rune, no invalid UTF-8.
	if got := tailText([]byte("aé"), 1, false); got != "" {
		t.Errorf("tailText cut inside é = %q", got)
	}
	if got := tailText([]byte("xéz"), 3, false); got != "...éz" {
		t.Errorf("tailText = %q", got)
	}
}

// TestConsumeHandlerFlagsRefused: a bad handler command line is a usage
// error (exit 2, one line) that changes nothing in the queue.
func TestConsumeHandlerFlagsRefused(t *testing.T) {
	q := newQueue(t)
	write(t, filepath.Join(q, "inbox", "a.json"), msg("1", "A", 1, "1.00"))
	dir := t.TempDir()
	sqlFile := func(name, text string) string {
		p := filepath.Join(dir, name)
		write(t, p, text)
		return p
	}
	good := sqlFile("good.sql", "INSERT INTO t VALUES (:msg_id);")
	before := listing(t, q)
	for _, tt := range []struct {
		args []string
		sub  string
	}{
		{[]string{"--exec", "true", "--sql", good}, "--exec and --sql: choose one handler"},
		{[]string{"--post", "http://127.0.0.1:1/", "--exec", "true"}, "--exec and --post: choose one handler"},
		{[]string{"--exec", ""}, "--exec is empty"},
		{[]string{"--retry-max", "3"}, "--retry-max needs a handler"},
		{[]string{"--retry-jitter=false"}, "--retry-jitter needs a handler"},
		{[]string{"--sql", good, "--exec-timeout", "1s"}, "--exec-timeout needs --exec"},
		{[]string{"--exec", "true", "--post-timeout", "1s"}, "--post-timeout needs --post"},
		{[]string{"--exec", "true", "--exec-timeout", "0s"}, "--exec-timeout 0s"},
		{[]string{"--exec", "true", "--retry-max", "0"}, "--retry-max 0"},
		{[]string{"--exec", "true", "--retry-base", "-1s"}, "--retry-base -1s"},
		{[]string{"--exec", "true", "--retry-base", "2s", "--retry-cap", "1s"}, "shorter than --retry-base"},
		{[]string{"--post", "ftp://example.com/"}, "want an http:// or https:// URL"},
		{[]string{"--post", "http:///nohost"}, "want an http:// or https:// URL"},
		{[]string{"--sql", filepath.Join(dir, "missing.sql")}, "no such file"},
		{[]string{"--sql", sqlFile("empty.sql", "")}, "no SQL statement"},
		{[]string{"--sql", sqlFile("comments.sql", "-- only a comment;\n/* and ; this */\n")}, "no SQL statement"},
		{[]string{"--sql", sqlFile("quote.sql", "SELECT 'x")}, "unterminated '"},
		{[]string{"--sql", sqlFile("positional.sql", "SELECT ?")}, "positional parameter"},
		{[]string{"--sql", sqlFile("commit.sql", "BEGIN;\nINSERT INTO t VALUES (:msg_id);\nCOMMIT;")}, "statement 1 (line 1): BEGIN: the statements already run inside the ledger's transaction"},
		{[]string{"--sql", sqlFile("release.sql", "INSERT INTO t VALUES (:msg_id);\n-- done\nrelease\tspool_message")}, "statement 2 (line 3): RELEASE"},
		{[]string{"--sql", sqlFile("syntax.sql", "CREATE TABLE IF NOT EXISTS t (k TEXT);\nSELEC :msg_id")}, "statement 2 (line 2)"},
		{[]string{"--sql", sqlFile("notable.sql", "INSERT INTO nowhere VALUES (:msg_id)")}, "no such table: nowhere"},
		{[]string{"--on-dead-letter", ""}, "--on-dead-letter is empty"},
		{[]string{"--on-dead-letter", "true", "--on-dead-letter-timeout", "0s"}, "--on-dead-letter-timeout 0s"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := cli(t, append([]string{"consume", q}, tt.args...)...)
			r.wantFail(t, 2, "consume", tt.sub)
		})
	}
	if after := listing(t, q); after != before {
		t.Errorf("a refused command changed the queue:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestSQLCheckSeesTablesItCreates: a parameterless statement (a CREATE
// TABLE IF NOT EXISTS) is run during the startup check, so that the
// statements after it compile; the check itself leaves nothing behind.
func TestSQLCheckSeesTablesItCreates(t *testing.T) {
	q := newQueue(t)
	f := filepath.Join(t.TempDir(), "s.sql")
	write(t, f, "CREATE TABLE IF NOT EXISTS seen (msg_id TEXT PRIMARY KEY);\nINSERT INTO seen VALUES (:msg_id);\n")
	cli(t, "consume", q, "--sql", f).want(t, 0, "processed=0 duplicates=0 dead-letters=0 recovered=0\n")
	write(t, filepath.Join(q, "inbox", "a.json"), msg("1", "A", 1, "1.00"))
	cli(t, "consume", q, "--sql", f).want(t, 0, "processed=1 duplicates=0 dead-letters=0 recovered=0\n")
}

// TestPostHandlerClassifies: every status class maps to success, a
// transient error (with Retry-After honoured up to the cap) or a
// permanent one, and the request carries what the server needs to
// deduplicate.
func TestPostHandlerClassifies(t *testing.T) {
	var mu sync.Mutex
	var got []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r)
		mu.Unlock()
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		if ra := r.URL.Query().Get("retry-after"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		if code >= 300 && code < 400 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(code)
		fmt.Fprint(w, r.URL.Query().Get("body"))
	}))
	defer srv.Close()
	m := &spool.Message{MsgID: "key-1", Raw: []byte(`{"msg_id":"key-1"}`)}
	for _, tt := range []struct {
		query     string
		permanent bool
		ok        bool
		after     time.Duration // a RetryAfterError's wait; 0: none
		sub       string
	}{
		{query: "code=200", ok: true},
		{query: "code=204", ok: true},
		{query: "code=503&retry-after=7", after: 7 * time.Second, sub: "503 Service Unavailable"},
		{query: "code=429&retry-after=3600", after: time.Minute, sub: "429"}, // capped
		{query: "code=408", sub: "408"},
		{query: "code=500&body=boom", sub: "500 Internal Server Error: boom"},
		{query: "code=400&body=amount+must+be+positive", permanent: true, sub: "400 Bad Request: amount must be positive"},
		{query: "code=404", permanent: true, sub: "404"},
		{query: "code=409", permanent: true, sub: "409"},
		{query: "code=302", permanent: true, sub: `redirect to "/elsewhere" not followed`},
	} {
		h := newPostHandler(srv.URL+"/?"+tt.query, 5*time.Second, time.Minute)
		err := h.Handle(context.Background(), nil, &spool.Delivery{Message: m})
		switch {
		case tt.ok:
			if err != nil {
				t.Errorf("%s: %v, want success", tt.query, err)
			}
			continue
		case err == nil:
			t.Errorf("%s: success, want a failure", tt.query)
			continue
		}
		if spool.IsPermanent(err) != tt.permanent {
			t.Errorf("%s: %v: permanent %v, want %v", tt.query, err, spool.IsPermanent(err), tt.permanent)
		}
		var ra *spool.RetryAfterError
		if errors.As(err, &ra) != (tt.after > 0) || (ra != nil && ra.After != tt.after) {
			t.Errorf("%s: %v: Retry-After %v, want %v", tt.query, err, ra, tt.after)
		}
		if !strings.Contains(err.Error(), tt.sub) {
			t.Errorf("%s: %q does not mention %q", tt.query, err, tt.sub)
		}
	}
	for _, r := range got {
		if r.Method != http.MethodPost || r.Header.Get("Idempotency-Key") != "key-1" ||
			r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %s %s: Idempotency-Key %q, Content-Type %q", r.Method, r.URL, r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type"))
		}
	}

	// Nobody listening: transient.
	srv.Close()
	err := newPostHandler(srv.URL, time.Second, time.Minute).Handle(context.Background(), nil, &spool.Delivery{Message: m})
	if err == nil || spool.IsPermanent(err) {
		t.Errorf("connection refused: %v, want a transient error", err)
	}
	// A key that cannot be a header value: permanent, nothing sent.
	bad := &spool.Message{MsgID: "a\nb", Raw: []byte(`{}`)}
	if err := newPostHandler("http://127.0.0.1:1/", time.Second, time.Minute).Handle(context.Background(), nil, &spool.Delivery{Message: bad}); !spool.IsPermanent(err) {
		t.Errorf("msg_id with a newline: %v, want a permanent error", err)
	}
}

func TestRunShell(t *testing.T) {
	ctx := context.Background()
	r := runShell(ctx, `cat; echo "one" >&2; printf 'two\n\n' >&2; exit 3`, os.Environ(), []byte("in"), 5*time.Second)
	if r.exitCode != 3 || r.timedOut || r.stderr != "one\ntwo" {
		t.Errorf("exit 3: %+v", r)
	}
	r = runShell(ctx, "exit 0", os.Environ(), nil, 5*time.Second)
	if r.err != nil || r.exitCode != 0 {
		t.Errorf("exit 0: %+v", r)
	}
	// A command that ignores stdin must not fail on the write to it.
	r = runShell(ctx, "exit 0", os.Environ(), make([]byte, 1<<20), 5*time.Second)
	if r.err != nil {
		t.Errorf("unread stdin: %+v", r)
	}
	r = runShell(ctx, `head -c 100000 /dev/zero | tr '\0' x >&2; echo END >&2; exit 1`, os.Environ(), nil, 5*time.Second)
	if !strings.HasPrefix(r.stderr, "...x") || !strings.HasSuffix(r.stderr, "xxxEND") || len(r.stderr) > maxDetailText+3 {
		t.Errorf("long stderr kept as %d bytes: %.20q...%q", len(r.stderr), r.stderr, r.stderr[max(0, len(r.stderr)-10):])
	}
}

// TestRunShellTimeoutKillsGroup: on timeout the command and the children
// it started are killed, and runShell returns within its bound.
func TestRunShellTimeoutKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	start := time.Now()
	r := runShell(context.Background(), "sleep 30 & echo $! > "+pidFile+"; wait", os.Environ(), nil, 300*time.Millisecond)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("runShell took %v with a 300ms timeout", took)
	}
	if !r.timedOut || r.err == nil {
		t.Fatalf("want a timeout, got %+v", r)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("child %d of the timed-out command is still alive", pid)
		}
		time.Sleep(10 * time.Millisecond) // poll interval: its parent (init) reaps it
	}
}

// TestNotifierNeverBlocks: a notifier whose command hangs never holds up
// the consumer: past its few pending slots a dead letter is skipped with a
// warning, and close gives up after its bound, killing what still runs.
func TestNotifierNeverBlocks(t *testing.T) {
	var mu sync.Mutex
	var warnings []string
	warn := func(format string, args ...any) {
		mu.Lock()
		warnings = append(warnings, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	n, err := newNotifier("sleep 30", t.TempDir(), time.Minute, 1, 1, warn)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 5 {
		n.deliver(&spool.Delivery{File: fmt.Sprint(i, ".json")},
			spool.Result{Outcome: spool.OutcomeDeadLetter, Reject: &spool.RejectError{Reason: spool.ReasonParse}}, fmt.Sprint(i, ".json"))
	}
	n.deliver(&spool.Delivery{File: "ok.json"}, spool.Result{Outcome: spool.OutcomeProcessed}, "ok.json") // not a dead letter: ignored
	if took := time.Since(start); took > time.Second {
		t.Errorf("handing over 5 dead letters took %v", took)
	}
	n.close(200 * time.Millisecond)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("close took %v with a 200ms bound", took)
	}
	n.deliver(&spool.Delivery{File: "late.json"}, spool.Result{Outcome: spool.OutcomeDeadLetter}, "late.json") // after close: dropped, no panic
	mu.Lock()
	defer mu.Unlock()
	skipped, killed := 0, 0
	for _, w := range warnings {
		switch {
		case strings.Contains(w, "not notified: 1 notifications already waiting"):
			skipped++
		case strings.Contains(w, "signal: killed"), strings.Contains(w, "notifications not run"):
			killed++
		}
	}
	if skipped < 3 || killed == 0 {
		t.Errorf("want >= 3 skipped and the running one killed, got:\n%s", strings.Join(warnings, "\n"))
	}
}

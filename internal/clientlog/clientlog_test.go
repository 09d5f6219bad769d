package clientlog

import (
	"bytes"
	"encoding/json"
	"log"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// every is the interval of the tests' Routers.
const every = 5 * time.Second

// TestClientLogRepeats: a client's line is let through once every
// interval, whatever its numbers; the next says how many were held
// back; another text or another client is another line; flush says what
// is still held back.
func TestClientLogRepeats(t *testing.T) {
	var out bytes.Buffer
	c := New(slog.New(slog.NewJSONHandler(&out, nil)), every)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	l := slog.New(c)
	at := func(d time.Duration) { now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(d) }
	dial := func(n int) {
		l.Warn("connection pool: failed to dial after "+strings.Repeat("1", n)+" attempts: dial tcp 127.0.0.1:6379", "client", "redis")
	}
	dial(1)
	at(time.Second)
	dial(2)
	dial(3)
	l.Warn("closing bad idle connection: EOF", "client", "mysql")
	l.Warn("connection pool: failed to dial after 1 attempts: dial tcp 127.0.0.1:6379", "client", "other")
	at(every)
	dial(4)
	at(every + time.Second)
	dial(5)
	l.Warn("closing bad idle connection: EOF", "client", "mysql")
	at(every + 2*time.Second)
	c.Flush()

	type rec struct {
		Msg        string `json:"msg"`
		Client     string `json:"client"`
		Suppressed int    `json:"suppressed"`
	}
	var got []rec
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r rec
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		got = append(got, rec{Msg: r.Msg[:min(len(r.Msg), 30)], Client: r.Client, Suppressed: r.Suppressed})
	}
	want := []rec{
		{"connection pool: failed to dia", "redis", 0},
		{"closing bad idle connection: E", "mysql", 0},
		{"connection pool: failed to dia", "other", 0},
		{"connection pool: failed to dia", "redis", 2}, // the two held back in the first interval
		{"closing bad idle connection: E", "mysql", 0}, // its interval over: let through
		{"connection pool: failed to dia", "redis", 1}, // flush: held back, said at the end
	}
	if len(got) != len(want) {
		t.Fatalf("records %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d: %+v, want %+v", i+1, got[i], want[i])
		}
	}
}

// TestClientLogTarget: the lines go to the logger given last, at its level.
func TestClientLogTarget(t *testing.T) {
	var first, second bytes.Buffer
	c := New(slog.New(slog.NewTextHandler(&first, nil)), every)
	l := slog.New(c)
	l.Warn("one", "client", "redis")
	c.Use(slog.New(slog.NewJSONHandler(&second, &slog.HandlerOptions{Level: slog.LevelError})))
	l.Warn("two", "client", "redis")
	l.Error("three", "client", "redis")
	if !strings.Contains(first.String(), "msg=one client=redis") || strings.Contains(first.String(), "two") {
		t.Errorf("first logger got %q", first.String())
	}
	if s := second.String(); strings.Contains(s, "two") || !strings.Contains(s, `"msg":"three","client":"redis"`) {
		t.Errorf("second logger got %q, want only the error, as JSON", s)
	}
}

// TestLogLines: the standard log package's lines become one record each,
// a line written in pieces once whole.
func TestLogLines(t *testing.T) {
	var out bytes.Buffer
	w := &LogLines{L: slog.New(slog.NewJSONHandler(&out, nil))}
	std := log.New(w, "", 0)
	std.Print("http: TLS handshake error")
	_, _ = w.Write([]byte("a line "))
	_, _ = w.Write([]byte("in two\nand a third\n"))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %q, want 3 records", out.String())
	}
	for i, want := range []string{"http: TLS handshake error", "a line in two", "and a third"} {
		var r struct{ Msg, Client, Level string }
		if err := json.Unmarshal([]byte(lines[i]), &r); err != nil || r.Msg != want || r.Client != "log" || r.Level != "WARN" {
			t.Errorf("record %d: %q, want %q at WARN with client=log", i+1, lines[i], want)
		}
	}
}

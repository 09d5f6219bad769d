package handler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
)

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
		h := newPost(t, srv.URL+"/?"+tt.query, 5*time.Second, time.Minute)
		err := h.Call(context.Background(), &spool.Delivery{Message: m})
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
	err := newPost(t, srv.URL, time.Second, time.Minute).Call(context.Background(), &spool.Delivery{Message: m})
	if err == nil || spool.IsPermanent(err) {
		t.Errorf("connection refused: %v, want a transient error", err)
	}
	// A key that cannot be a header value: permanent, nothing sent.
	bad := &spool.Message{MsgID: "a\nb", Raw: []byte(`{}`)}
	if err := newPost(t, "http://127.0.0.1:1/", time.Second, time.Minute).Call(context.Background(), &spool.Delivery{Message: bad}); !spool.IsPermanent(err) {
		t.Errorf("msg_id with a newline: %v, want a permanent error", err)
	}
	// Spaces around a key: HTTP would strip them, and the downstream would
	// see another msg_id's key.
	for _, id := range []string{" sp ", "sp ", "\tsp"} {
		spaced := &spool.Message{MsgID: id, Raw: []byte(`{}`)}
		err := newPost(t, "http://127.0.0.1:1/", time.Second, time.Minute).Call(context.Background(), &spool.Delivery{Message: spaced})
		if !spool.IsPermanent(err) || !strings.Contains(err.Error(), "spaces or tabs around it") {
			t.Errorf("msg_id %q: %v, want a permanent error naming the spaces", id, err)
		}
	}
}

func newPost(t *testing.T, u string, timeout, maxRetryAfter time.Duration) *Post {
	t.Helper()
	p, err := NewPost(u, PostOptions{Timeout: timeout, MaxRetryAfter: maxRetryAfter})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewPostRefuses(t *testing.T) {
	for _, u := range []string{"ftp://example.com/", "http:///nohost", "example.com", "://x"} {
		if _, err := NewPost(u, PostOptions{}); err == nil {
			t.Errorf("NewPost(%q): nil error, want one", u)
		}
	}
}

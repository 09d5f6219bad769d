package handler

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool"
)

// DefaultPostTimeout is PostOptions' Timeout when it is zero.
const DefaultPostTimeout = 30 * time.Second

// maxBodyExcerpt bounds what Post reads of a failed response's body.
const maxBodyExcerpt = 1 << 10

// PostOptions tune a Post.
type PostOptions struct {
	// Timeout bounds one request, from connecting to reading the
	// response; a request that runs out of it is retried. Zero:
	// DefaultPostTimeout.
	Timeout time.Duration
	// MaxRetryAfter bounds the wait a response's Retry-After header may
	// ask for: a message should not wait longer than the retry policy's
	// longest delay because of one header. Zero: spool.DefaultRetryCap.
	MaxRetryAfter time.Duration
	// UserAgent is the requests' User-Agent header. Empty: "spool".
	UserAgent string
	// Connections is how many idle connections to the endpoint are kept
	// for reuse: the consumer's concurrency, so that concurrent requests
	// do not each open a connection. Zero: spool.DefaultConcurrency.
	Connections int
}

// Post sends each message to an HTTP endpoint (spool consume --post): a
// POST of the message's bytes as application/json, with the msg_id as its
// Idempotency-Key, so that the server can recognise a retry of a request
// whose response was lost. Redirects are not followed.
//
// A 2xx status is success. 408, 429, 5xx and network errors are transient,
// with the response's Retry-After honoured up to MaxRetryAfter (a
// *spool.RetryAfterError); any other status is permanent. The start of the
// response's body is the failure's detail.
//
// A Post is safe for concurrent use.
type Post struct {
	url           string
	timeout       time.Duration
	client        *http.Client
	maxRetryAfter time.Duration
	userAgent     string
}

// NewPost returns a Post to rawURL, which must be an http:// or https://
// URL with a host.
func NewPost(rawURL string, o PostOptions) (*Post, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("post %q: want an http:// or https:// URL", rawURL)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultPostTimeout
	}
	if o.MaxRetryAfter <= 0 {
		o.MaxRetryAfter = spool.DefaultRetryCap
	}
	if o.UserAgent == "" {
		o.UserAgent = "spool"
	}
	if o.Connections <= 0 {
		o.Connections = spool.DefaultConcurrency
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = o.Connections
	transport.MaxIdleConns = max(transport.MaxIdleConns, o.Connections)
	return &Post{
		url: u.String(), timeout: o.Timeout,
		client: &http.Client{
			Transport: transport,
			Timeout:   o.Timeout,
			// A redirect would turn the POST into a GET (301, 302, 303) or
			// resend the message elsewhere: report it instead.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		maxRetryAfter: o.MaxRetryAfter,
		userAgent:     o.UserAgent,
	}, nil
}

// Call posts d's message. A Post is a spool.Caller: its effect is outside
// the ledger, so the consumer calls it outside any ledger transaction.
func (h *Post) Call(ctx context.Context, d *spool.Delivery) error {
	return h.Send(ctx, d.Message.MsgID, d.Message.Raw, nil)
}

// Send posts body with key as its Idempotency-Key and the headers of
// extra besides (for spool relay, which carries an event's headers), by
// the rules of Call: Call is Send of the message's bytes under its msg_id.
// extra cannot replace Content-Type, Idempotency-Key or User-Agent.
func (h *Post) Send(ctx context.Context, key string, body []byte, extra http.Header) error {
	for _, c := range []byte(key) {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return spool.Permanent(fmt.Errorf("post: msg_id %q cannot be sent as an Idempotency-Key header", key))
		}
	}
	if t := strings.Trim(key, " \t"); t != key {
		// HTTP strips a header value's surrounding spaces and tabs: the
		// downstream would see the key of another msg_id.
		return spool.Permanent(fmt.Errorf("post: msg_id %q has spaces or tabs around it, which HTTP strips from an Idempotency-Key header: the downstream would take it for %q", key, t))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return spool.Permanent(fmt.Errorf("post: %w", err))
	}
	// The body cannot be rewound: every request sent is one of the
	// consumer's counted attempts, under its rate, backoff and attempt
	// count. net/http's Transport replays on its own a request whose body
	// it can rewind (GetBody) and which carries an Idempotency-Key, when
	// a kept-alive connection fails after the request was written
	// (isReplayable), and it resends one that was not written at all; the
	// server would see requests spool never counted. Without GetBody it
	// does neither, and the failure is this attempt's, retried by the
	// consumer's policy (HTTP/2 refuses likewise to resend a written
	// request whose body it cannot rewind).
	req.GetBody = nil
	for k, vs := range extra {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("User-Agent", h.userAgent)
	resp, err := h.client.Do(req)
	if err != nil {
		return fmt.Errorf("post: %w", err) // the network, a timeout: try again later
	}
	defer resp.Body.Close()
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, maxBodyExcerpt))
	// Read a little more so the connection can be reused; no more, a body
	// that goes on is not worth the wait.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return h.classify(resp, excerpt)
}

// Kind is "post" (spool.Kinded), the handler kind metrics report.
func (h *Post) Kind() string { return "post" }

// CallTimeout is the bound of one request (spool.TimeoutCaller).
func (h *Post) CallTimeout() time.Duration { return h.timeout }

// classify maps a response to success, a transient or a permanent error.
func (h *Post) classify(resp *http.Response, excerpt []byte) error {
	code := resp.StatusCode
	if code >= 200 && code <= 299 {
		return nil
	}
	err := fmt.Errorf("post: %s%s", resp.Status, bodyDetail(excerpt))
	switch {
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code >= 500:
		if after, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return &spool.RetryAfterError{Err: err, After: min(after, h.maxRetryAfter)}
		}
		return err
	case code >= 300 && code <= 399:
		return spool.Permanent(fmt.Errorf("%w (redirect to %q not followed)", err, resp.Header.Get("Location")))
	}
	return spool.Permanent(err)
}

// bodyDetail is ": BODY" for an error message, or "" for an empty body.
func bodyDetail(b []byte) string {
	s := tailText(b, maxDetailText, false)
	if s == "" {
		return ""
	}
	return ": " + s
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an
// HTTP-date (RFC 9110, 10.2.3), as a wait from now.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		if n > int64(365*24*time.Hour/time.Second) {
			n = int64(365 * 24 * time.Hour / time.Second) // no overflow
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

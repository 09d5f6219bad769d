package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// Handler defaults of consume.
const (
	defaultExecTimeout = 30 * time.Second
	defaultPostTimeout = 30 * time.Second
	// exitTempFail is sysexits.h's EX_TEMPFAIL: an --exec command that exits
	// with it asks for a retry.
	exitTempFail = 75
	// maxStderr bounds the stderr kept of an --exec or --on-dead-letter
	// command: its last bytes, where the reason for a failure usually is.
	maxStderr = 4 << 10
	// maxDetailText bounds the command output or response body put into a
	// handler's error. The ledger keeps the first 2000 characters of an
	// error as the dead letter's detail, so the text that follows the
	// error's prefix is cut to fit in them, keeping its end.
	maxDetailText = 1800
	// maxBodyExcerpt bounds what --post reads of a failed response's body.
	maxBodyExcerpt = 1 << 10
)

// handlerFlags are consume's flags that choose the business handler run for
// each message in the ledger transaction, and tune its retries.
type handlerFlags struct {
	fs          *flag.FlagSet
	exec        string
	execTimeout time.Duration
	sqlFile     string
	post        string
	postTimeout time.Duration
	retryBase   time.Duration
	retryCap    time.Duration
	retryMax    int
	retryJitter bool

	// Set by check.
	statements []sqlStatement
	postURL    *url.URL
}

// addHandlerFlags registers the handler and retry flags on fs.
func addHandlerFlags(fs *flag.FlagSet) *handlerFlags {
	hf := &handlerFlags{fs: fs}
	fs.StringVar(&hf.exec, "exec", "", "run `CMD` with /bin/sh -c for each message (message on stdin, SPOOL_* variables); exit 0 done, 75 retry, other exit dead letter")
	fs.DurationVar(&hf.execTimeout, "exec-timeout", defaultExecTimeout, "kill an --exec command (its whole process group) after `DURATION` and retry the message")
	fs.StringVar(&hf.sqlFile, "sql", "", "run the SQL statements of `FILE` for each message in the ledger transaction, with :msg_id, :order_no, :seq, :amount, :file, :payload and :FIELD parameters")
	fs.StringVar(&hf.post, "post", "", "POST each message to `URL` with an Idempotency-Key header; 2xx done, 408, 429, 5xx and network errors retry, other 4xx dead letter")
	fs.DurationVar(&hf.postTimeout, "post-timeout", defaultPostTimeout, "give up on a --post request after `DURATION` and retry the message")
	fs.DurationVar(&hf.retryBase, "retry-base", spool.DefaultRetryBase, "upper bound of the first retry's delay, `DURATION`; doubled for each further attempt")
	fs.DurationVar(&hf.retryCap, "retry-cap", spool.DefaultRetryCap, "longest `DURATION` between two attempts (also bounds an HTTP Retry-After)")
	fs.IntVar(&hf.retryMax, "retry-max", spool.DefaultRetryMaxAttempts, "`N` attempts a message gets in all before it is dead-lettered as retries-exhausted")
	fs.BoolVar(&hf.retryJitter, "retry-jitter", true, "draw each delay at random below its bound (full jitter); false waits exactly the bound")
	return hf
}

// kind names the handler the flags chose: exec, sql, post, or "" for none.
func (hf *handlerFlags) kind() string {
	switch {
	case strings.TrimSpace(hf.exec) != "":
		return "exec"
	case strings.TrimSpace(hf.sqlFile) != "":
		return "sql"
	case strings.TrimSpace(hf.post) != "":
		return "post"
	}
	return ""
}

// check validates the flags without touching the queue or the ledger, so
// that a bad command line changes nothing: at most one handler, positive
// timeouts, a sane retry policy, a URL spool can post to, and a --sql file
// that splits into statements.
func (hf *handlerFlags) check(e *env) error {
	set := map[string]bool{}
	hf.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var chosen []string
	for _, name := range []string{"exec", "sql", "post"} {
		if set[name] {
			chosen = append(chosen, "--"+name)
		}
	}
	if len(chosen) > 1 {
		return e.usage("%s: choose one handler", strings.Join(chosen, " and "))
	}
	if len(chosen) == 1 && hf.kind() == "" {
		return e.usage("%s is empty", chosen[0])
	}
	kind := hf.kind()
	for _, f := range []struct{ name, needs string }{
		{"exec-timeout", "exec"}, {"post-timeout", "post"},
	} {
		if set[f.name] && kind != f.needs {
			return e.usage("--%s needs --%s", f.name, f.needs)
		}
	}
	for _, name := range []string{"retry-base", "retry-cap", "retry-max", "retry-jitter"} {
		if set[name] && kind == "" {
			return e.usage("--%s needs a handler (--exec, --sql or --post)", name)
		}
	}
	switch {
	case hf.execTimeout <= 0:
		return e.usage("--exec-timeout %v: want a positive duration", hf.execTimeout)
	case hf.postTimeout <= 0:
		return e.usage("--post-timeout %v: want a positive duration", hf.postTimeout)
	case hf.retryBase <= 0:
		return e.usage("--retry-base %v: want a positive duration", hf.retryBase)
	case hf.retryCap <= 0:
		return e.usage("--retry-cap %v: want a positive duration", hf.retryCap)
	case hf.retryCap < hf.retryBase:
		return e.usage("--retry-cap %v is shorter than --retry-base %v", hf.retryCap, hf.retryBase)
	case hf.retryMax < 1:
		return e.usage("--retry-max %d: want 1 or more attempts", hf.retryMax)
	}
	switch kind {
	case "sql":
		stmts, err := readSQLFile(hf.sqlFile)
		if err != nil {
			return &usageError{msg: err.Error()}
		}
		hf.statements = stmts
	case "post":
		u, err := url.Parse(hf.post)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return e.usage("--post %q: want an http:// or https:// URL", hf.post)
		}
		hf.postURL = u
	}
	return nil
}

// retry is the backoff policy the flags give.
func (hf *handlerFlags) retry() spool.Retry {
	return spool.Retry{Base: hf.retryBase, Cap: hf.retryCap, MaxAttempts: hf.retryMax, NoJitter: !hf.retryJitter}
}

// handler returns the handler the flags chose, nil for none. A --sql file
// is checked against the ledger first (see newSQLHandler).
func (hf *handlerFlags) handler(ctx context.Context, l *ledger.DB, queueDir string) (spool.Handler, error) {
	abs, err := filepath.Abs(queueDir)
	if err != nil {
		return nil, fmt.Errorf("queue path: %w", err)
	}
	switch hf.kind() {
	case "exec":
		return &execHandler{command: hf.exec, timeout: hf.execTimeout, queue: abs}, nil
	case "sql":
		return newSQLHandler(ctx, l, hf.sqlFile, hf.statements)
	case "post":
		return newPostHandler(hf.postURL.String(), hf.postTimeout, hf.retryCap), nil
	}
	return nil, nil
}

// fileName is the delivery's name in inbox/ as the ledger stores it in
// processed.file: invalid UTF-8 and NUL replaced by U+FFFD. Handlers pass
// the stored name on, so that what they write matches the ledger's row.
func fileName(d *spool.Delivery) string {
	return strings.ReplaceAll(strings.ToValidUTF8(d.File, "\uFFFD"), "\x00", "\uFFFD")
}

// execHandler runs a shell command for each message: --exec.
type execHandler struct {
	command string
	timeout time.Duration
	queue   string // absolute
}

// Handle runs the command with the message on stdin. Exit 0 is success;
// exit 75 (EX_TEMPFAIL), a timeout, a death by a signal or a failure to
// start are transient; any other exit status is permanent. The command's
// stdout is discarded (consume's stdout is for its summary); the end of its
// stderr is the failure's detail.
func (h *execHandler) Handle(ctx context.Context, _ *sql.Tx, d *spool.Delivery) error {
	m, file := d.Message, fileName(d)
	seq := ""
	if m.Seq != 0 {
		seq = strconv.FormatInt(m.Seq, 10)
	}
	vars := []struct{ name, value string }{
		{"SPOOL_MSG_ID", m.MsgID}, {"SPOOL_ORDER_NO", m.OrderNo}, {"SPOOL_SEQ", seq},
		{"SPOOL_AMOUNT", string(m.Amount)}, {"SPOOL_FILE", file}, {"SPOOL_QUEUE", h.queue},
	}
	env := os.Environ()
	for _, v := range vars {
		if strings.IndexByte(v.value, 0) >= 0 {
			// The message on stdin is exact; a variable cannot be, and a
			// mangled key would defeat the command's own idempotency.
			return spool.Permanent(fmt.Errorf("exec: %s holds a NUL byte, which the environment cannot carry", v.name))
		}
		env = append(env, v.name+"="+v.value)
	}
	r := runShell(ctx, h.command, env, m.Raw, h.timeout)
	switch {
	case r.err == nil:
		return nil
	case r.timedOut:
		return fmt.Errorf("exec: timed out after %v, process group killed%s", h.timeout, r.detail())
	case r.exitCode == exitTempFail:
		return fmt.Errorf("exec: exit status %d (temporary failure)%s", r.exitCode, r.detail())
	case r.exitCode > 0:
		return spool.Permanent(fmt.Errorf("exec: exit status %d%s", r.exitCode, r.detail()))
	}
	// Killed by a signal nobody here sent (the OOM killer, an operator), or
	// not started at all: nothing says the message is at fault.
	return fmt.Errorf("exec: %w%s", r.err, r.detail())
}

// shellResult is what became of one shell command.
type shellResult struct {
	err      error // nil: exit status 0
	exitCode int   // the exit status; -1 when it did not exit by itself
	timedOut bool
	stderr   string // the end of its stderr, trimmed
}

// detail is ": STDERR" for an error message, or "" when stderr was empty.
func (r shellResult) detail() string {
	if r.stderr == "" {
		return ""
	}
	return ": " + r.stderr
}

// runShell runs command with /bin/sh -c in a process group of its own,
// stdin fed from stdin (nil: /dev/null), stdout discarded, and the end of
// stderr kept. After timeout, or when ctx is done, the whole group is
// killed, so a command that started children of its own cannot outlive
// its bound; WaitDelay then stops waiting for descendants that escaped
// the group but still hold stderr open.
func runShell(ctx context.Context, command string, env []string, stdin []byte, timeout time.Duration) shellResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Env = env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	tail := &tailBuffer{max: maxStderr}
	cmd.Stderr = tail
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState.Success() {
		// It succeeded; a descendant it left behind kept stderr open.
		err = nil
	}
	r := shellResult{err: err, exitCode: -1, stderr: tail.text(maxDetailText)}
	if err == nil {
		r.exitCode = 0
		return r
	}
	r.timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
	var ee *exec.ExitError
	if errors.As(err, &ee) && !r.timedOut {
		r.exitCode = ee.ExitCode()
	}
	return r
}

// tailBuffer is an io.Writer that keeps the last max bytes written to it.
type tailBuffer struct {
	max     int
	buf     []byte
	dropped bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > t.max {
		p, t.dropped = p[len(p)-t.max:], true
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf, t.dropped = append(t.buf[:0], t.buf[over:]...), true
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// text returns at most limit bytes of the end of what was written, trimmed,
// as valid UTF-8, with "..." in front when the beginning was dropped.
func (t *tailBuffer) text(limit int) string {
	return tailText(t.buf, limit, t.dropped)
}

// tailText is the end of b as text: at most limit bytes, trimmed, valid
// UTF-8, marked with "..." when something was cut.
func tailText(b []byte, limit int, cut bool) string {
	b = bytes.TrimSpace(b)
	if len(b) > limit {
		b, cut = b[len(b)-limit:], true
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:] // a rune cut in half
		}
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if cut && s != "" {
		s = "..." + s
	}
	return s
}

// postHandler POSTs each message: --post.
type postHandler struct {
	url    string
	client *http.Client
	// maxRetryAfter bounds a Retry-After the server asks for: a message
	// should not wait longer than the policy's longest delay because of one
	// response header.
	maxRetryAfter time.Duration
	userAgent     string
}

func newPostHandler(u string, timeout, maxRetryAfter time.Duration) *postHandler {
	return &postHandler{
		url: u,
		client: &http.Client{
			Timeout: timeout,
			// A redirect would turn the POST into a GET (301, 302, 303) or
			// resend the message elsewhere: report it instead.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		maxRetryAfter: maxRetryAfter,
		userAgent:     "spool/" + strings.Fields(version())[0],
	}
}

// Handle posts the message body as application/json with the msg_id as
// its Idempotency-Key, so that the server can recognise a retry of a
// request whose response was lost. 2xx is success; 408, 429, 5xx and
// network errors are transient, with the response's Retry-After honoured
// (up to the retry cap); any other status is permanent.
func (h *postHandler) Handle(ctx context.Context, _ *sql.Tx, d *spool.Delivery) error {
	m := d.Message
	for _, c := range []byte(m.MsgID) {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return spool.Permanent(fmt.Errorf("post: msg_id %q cannot be sent as an Idempotency-Key header", m.MsgID))
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(m.Raw))
	if err != nil {
		return spool.Permanent(fmt.Errorf("post: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", m.MsgID)
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
	code := resp.StatusCode
	if code >= 200 && code <= 299 {
		return nil
	}
	err = fmt.Errorf("post: %s%s", resp.Status, bodyDetail(excerpt))
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

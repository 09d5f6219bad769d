package console

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/report"
)

// maxBody bounds the body GET messages/{msg_id} returns.
const maxBody = 1 << 20

func (s *Server) getSession(r *request) (int, any) {
	out := map[string]any{"name": r.id.Name, "role": r.id.Role.String()}
	if sess := s.session(r.Request); sess != nil && r.Header.Get("Authorization") == "" {
		out["csrf"] = sess.csrf
	}
	return http.StatusOK, out
}

// ledgerCounts keeps the ledger's counts for the overview: read at most
// every statsEvery, however many pages ask.
type ledgerCounts struct {
	mu     sync.Mutex
	last   ledger.Stats
	files  []report.BatchFileJSON // the batch files last committed, the latest first
	lastAt time.Time
}

const statsEvery = 5 * time.Second

// getOverview answers the stages' gauges, the ledger's counts and the
// rates: those of the charts' last sample (series.go), so that the table
// and the charts agree; null until the sampler has read the ledger
// twice, and a rate whose count went down (prune) null too.
func (s *Server) getOverview(r *request) (int, any) {
	rs := &s.counts
	rs.mu.Lock()
	defer rs.mu.Unlock()
	now := time.Now()
	if rs.lastAt.IsZero() || now.Sub(rs.lastAt) >= statsEvery {
		st, err := s.o.Ledger.Messages().Stats(r.Context())
		if err != nil {
			return s.failed(r, err)
		}
		files, err := s.o.Ledger.Messages().RecentBatchFiles(r.Context(), maxBatchFiles)
		if err != nil {
			return s.failed(r, err)
		}
		rs.files = make([]report.BatchFileJSON, 0, len(files))
		for _, f := range files {
			rs.files = append(rs.files, report.BatchFileJSON{File: f.Name, Processed: f.Processed,
				Duplicates: f.Duplicates, DeadLetters: f.DeadLetters, LastCommit: f.At.UTC()})
		}
		rs.last, rs.lastAt = st, now
	}
	stages := s.stages()
	rates := map[string]any{"processed_per_second": nil, "duplicates_per_second": nil, "dead_letters_per_second": nil, "over_seconds": nil}
	if v, over, ok := s.hist.rates(); ok {
		for k, name := range []string{"processed_per_second", "duplicates_per_second", "dead_letters_per_second"} {
			if v[k] != nil {
				rates[name] = *v[k]
			}
		}
		rates["over_seconds"] = over
	}
	by := map[string]int64{}
	for k, v := range rs.last.DeadLettersByReason {
		by[string(k)] = v
	}
	paused, held := s.holdOverview(r)
	return http.StatusOK, map[string]any{
		"paused": paused,
		"held":   held,
		"queue":  s.o.Dir.Path(),
		"stages": stages,
		"ledger": map[string]any{"processed": rs.last.Processed, "duplicates": rs.last.Duplicates,
			"dead_letters_recorded": rs.last.DeadLetters, "dead_letters_by_reason": by},
		"rates":       rates,
		"batch_files": rs.files,
		"at":          now.UTC().Format(ledger.TimeLayout),
	}
}

// maxBatchFiles bounds the batch files the overview lists, as spool
// status does.
const maxBatchFiles = 10

// stages are the stages' gauges as the overview and the charts show
// them: Options.Gauges's, nothing without it.
func (s *Server) stages() []StageGauge {
	if s.o.Gauges == nil {
		return nil
	}
	return s.o.Gauges()
}

// failed answers 500 for err, logged.
func (s *Server) failed(r *request, err error) (int, any) {
	s.o.Log.Error("api", "path", r.URL.Path, "err", err)
	return http.StatusInternalServerError, apiError("%v", err)
}

// DeadLetterJSON is one item of GET dead-letters.
type DeadLetterJSON struct {
	ID           int64   `json:"id"`
	File         string  `json:"file"`
	Reason       string  `json:"reason"`
	Field        *string `json:"field"`
	Detail       string  `json:"detail"`
	Signature    string  `json:"signature"`
	MsgID        *string `json:"msg_id"`
	At           string  `json:"at"`
	Attempts     int     `json:"attempts"`
	LastFailure  *string `json:"last_failure"`
	Consumer     string  `json:"consumer"`
	Size         int64   `json:"size"`
	ContentHash  *string `json:"content_hash"`
	MessageQuery string  `json:"message"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func timeText(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(ledger.TimeLayout)
	return &s
}

// parseTimeParam reads a time parameter: RFC 3339 with its offset
// (2026-01-02T15:04:05+09:00, Z for UTC; seconds may be left out), as the
// console sends it from the browser's time zone. A time or a date without
// an offset is UTC: the server's zone is no one's, and the browser's is
// not known here.
func parseTimeParam(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s %q: want an RFC 3339 time (2026-01-02T15:04:05Z) or a date", name, v)
}

// deadLetterQuery reads the filters of GET dead-letters.
func deadLetterQuery(r *http.Request) (ledger.DeadLetterQuery, error) {
	v := r.URL.Query()
	q := ledger.DeadLetterQuery{Reason: v.Get("reason"), Text: v.Get("q"), Detail: v.Get("detail")}
	err := pageParams(v, ledger.MaxDeadLetterPage, &q.Since, &q.Until, &q.Limit, &q.Before)
	return q, err
}

// pageParams reads the parameters that every paged list takes: since and
// until (parseTimeParam), limit (1 to maxLimit; limit is left as it is
// when the parameter is absent) and cursor (cursorParam).
func pageParams(v url.Values, maxLimit int, since, until *time.Time, limit *int, cursor *int64) error {
	var err error
	if *since, err = parseTimeParam("since", v.Get("since")); err != nil {
		return err
	}
	if *until, err = parseTimeParam("until", v.Get("until")); err != nil {
		return err
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxLimit {
			return fmt.Errorf("limit %q: want 1 to %d", l, maxLimit)
		}
		*limit = n
	}
	return cursorParam(v, "cursor", cursor)
}

// cursorParam reads a cursor parameter: a row id this API gave in a page,
// always positive; *to is left as it is when the parameter is absent.
func cursorParam(v url.Values, name string, to *int64) error {
	if c := v.Get(name); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("%s %q: not one this API gave", name, c)
		}
		*to = n
	}
	return nil
}

func (s *Server) getDeadLetters(r *request) (int, any) {
	q, err := deadLetterQuery(r.Request)
	if err != nil {
		return http.StatusBadRequest, apiError("%v", err)
	}
	// The page lists the files of error/ as it is: a record whose file
	// left it in a way the ledger does not know (removed by hand) is left
	// out (report.InError).
	q.Check = report.NewInError(s.o.Dir, s.o.Ledger).Check
	recs, next, err := s.o.Ledger.DeadLetters().Page(r.Context(), q)
	if err != nil {
		return s.failed(r, err)
	}
	items := make([]DeadLetterJSON, 0, len(recs))
	for _, d := range recs {
		attempts := d.Attempts
		if attempts == 0 {
			attempts = 1
		}
		j := DeadLetterJSON{ID: d.ID, File: d.File, Reason: string(d.Reason), Field: optional(d.Field), Detail: d.Detail,
			Signature: ledger.Signature(d.Field, d.Detail), MsgID: optional(d.MsgID), At: *timeText(d.At), Attempts: attempts,
			LastFailure: timeText(d.LastFailure), Consumer: d.Consumer, Size: d.Size, ContentHash: optional(d.ContentHash),
			MessageQuery: cmpOr(d.MsgID, d.File)}
		items = append(items, j)
	}
	var cursor *string
	if next > 0 {
		c := strconv.FormatInt(next, 10)
		cursor = &c
	}
	return http.StatusOK, map[string]any{"items": items, "next": cursor}
}

func (s *Server) getGroups(r *request) (int, any) {
	gs, err := s.o.Ledger.DeadLetters().Groups(r.Context(), report.NewInError(s.o.Dir, s.o.Ledger).Check)
	if err != nil {
		return s.failed(r, err)
	}
	type groupJSON struct {
		Reason    string `json:"reason"`
		Signature string `json:"signature"`
		Example   string `json:"example"`
		Count     int64  `json:"count"`
		First     string `json:"first"`
		Last      string `json:"last"`
	}
	out := make([]groupJSON, 0, len(gs))
	for _, g := range gs {
		out = append(out, groupJSON{Reason: g.Reason, Signature: g.Signature, Example: g.Example, Count: g.Count,
			First: *timeText(g.First), Last: *timeText(g.Last)})
	}
	return http.StatusOK, map[string]any{"groups": out}
}

// messageJSON is GET messages/{msg_id}: the story of spool show --json,
// with the body of its first file found in a stage (or of its processed
// row), as a JSON string (invalid UTF-8 as U+FFFD), at most maxBody bytes.
type messageJSON struct {
	report.StoryJSON
	Body          *string `json:"body"`
	BodyFrom      string  `json:"body_from,omitempty"`
	BodyTruncated bool    `json:"body_truncated,omitempty"`
}

func (s *Server) getMessage(r *request) (int, any) {
	arg := r.PathValue("msg_id")
	m, err := report.Story(r.Context(), s.o.Dir, s.o.Ledger, arg)
	if err != nil {
		return s.failed(r, err)
	}
	if !m.Found() {
		return http.StatusNotFound, apiError("the queue knows nothing of %q (no ledger record, no file of that name)", arg)
	}
	out := messageJSON{StoryJSON: m.JSON(time.Now())}
	for _, p := range m.Places {
		b, truncated, err := readBody(filepath.Join(s.o.Dir.Path(), string(p.Stage), p.Name))
		if err != nil {
			continue // moved on since: try the next place
		}
		out.Body, out.BodyFrom, out.BodyTruncated = &b, string(p.Stage)+"/"+p.Name, truncated
		break
	}
	if out.Body == nil && m.Processed != nil {
		b := strings.ToValidUTF8(m.Processed.Payload, "\uFFFD")
		out.Body, out.BodyFrom = &b, "ledger"
	}
	return http.StatusOK, out
}

// readBody reads at most maxBody bytes of the regular file at path,
// without following a link.
func readBody(path string) (string, bool, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", false, err
	}
	if !fi.Mode().IsRegular() {
		return "", false, errors.New("not a regular file")
	}
	f, err := os.Open(path)
	if err != nil {
		return "", false, err
	}
	defer f.Close() // read only
	b, err := io.ReadAll(io.LimitReader(f, maxBody+1))
	if err != nil {
		return "", false, err
	}
	truncated := len(b) > maxBody
	if truncated {
		b = b[:maxBody]
		for len(b) > 0 && !utf8.Valid(b[len(b)-min(len(b), 3):]) {
			b = b[:len(b)-1]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), truncated, nil
}

// maxAuditPage is the most rows a page of GET audit holds.
const maxAuditPage = 1000

// auditQuery reads the filters and the cursor of GET audit: actor (a
// realm-qualified name, or a bare one for every realm), action, outcome,
// since, until (RFC 3339 with its offset), limit (1 to maxAuditPage, 100
// by default), and cursor (the rows older than a page, its "next") or
// after (the rows newer, its "newer"), not both.
func auditQuery(r *http.Request) (ledger.AuditQuery, error) {
	v := r.URL.Query()
	q := ledger.AuditQuery{Newest: true, Limit: 100, Actor: strings.TrimSpace(v.Get("actor")),
		Action: strings.TrimSpace(v.Get("action")), Outcome: v.Get("outcome")}
	if q.Outcome != "" && !slices.Contains(auditOutcomes, q.Outcome) {
		return q, fmt.Errorf("outcome %q: want one of %s", q.Outcome, strings.Join(auditOutcomes, ", "))
	}
	if err := pageParams(v, maxAuditPage, &q.Since, &q.Until, &q.Limit, &q.Before); err != nil {
		return q, err
	}
	if err := cursorParam(v, "after", &q.After); err != nil {
		return q, err
	}
	if q.Before > 0 && q.After > 0 {
		return q, errors.New("cursor and after: give one, the page's next or its newer")
	}
	return q, nil
}

// auditOutcomes are the outcomes GET audit filters on.
var auditOutcomes = []string{ledger.AuditStarted, ledger.AuditOK, ledger.AuditFailed, ledger.AuditInterrupted, ledger.AuditRefused}

// getAudit answers a page of the audit, newest first: {"items", "next",
// "newer"}, next the cursor of the older rows (null on the oldest page),
// newer the after of the newer ones (null on the newest page). A page is
// read with one row more than it shows, so that a cursor is given only
// when there is a page to go to.
func (s *Server) getAudit(r *request) (int, any) {
	q, err := auditQuery(r.Request)
	if err != nil {
		return http.StatusBadRequest, apiError("%v", err)
	}
	limit := q.Limit
	q.Limit++
	// after: the rows just newer than it, read oldest first and shown
	// newest first.
	if q.After > 0 {
		q.Newest = false
	}
	rows, err := s.o.Ledger.Audit().List(r.Context(), q)
	if err != nil {
		return s.failed(r, err)
	}
	more := len(rows) > limit
	rows = rows[:min(len(rows), limit)]
	if q.After > 0 {
		slices.Reverse(rows)
	}
	items := make([]report.AuditJSON, 0, len(rows))
	for _, row := range rows {
		items = append(items, report.AuditRowJSON(report.AuditEntry{AuditRow: row}))
	}
	var next, newer *string
	cursor := func(id int64) *string { c := strconv.FormatInt(id, 10); return &c }
	switch {
	case len(rows) == 0:
	case q.After > 0:
		next = cursor(rows[len(rows)-1].ID) // the page came after that one
		if more {
			newer = cursor(rows[0].ID)
		}
	default:
		if more {
			next = cursor(rows[len(rows)-1].ID)
		}
		if q.Before > 0 {
			newer = cursor(rows[0].ID)
		}
	}
	return http.StatusOK, map[string]any{"items": items, "next": next, "newer": newer}
}

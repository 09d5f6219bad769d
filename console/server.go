package console

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/spoolq/spool/hold"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/task"
)

// Options are what a Server serves.
type Options struct {
	// Dir is the queue, Ledger its ledger opened for writing (the audit's
	// rows, the tasks). Both required.
	Dir    *queue.Dir
	Ledger *ledger.DB
	// Tokens are the identities that may sign in. Required.
	Tokens task.Tokens
	// Gauges gives the queue's stages as the metrics last listed them, for
	// the overview (see metrics.Metrics.Gather); nil lists nothing.
	Gauges func() []StageGauge
	// Tasks asks, approves, cancels and runs the replay and discard
	// tasks. Required.
	Tasks *task.Service
	// Holds pauses and resumes the queue and holds and releases its
	// messages (pause.go); nil serves none of that.
	Holds *hold.Service
	// Log receives the server's records; nil discards them.
	Log *slog.Logger
	// Host and PID name this process in the audit's rows.
	Host string
	PID  int
	// SampleEvery is how often the charts' sampler reads the gauges and
	// the ledger (series.go), between Start and Close; 0 is
	// DefaultSampleEvery. It samples no faster than the gauges change:
	// spool serve gives it --metrics-refresh.
	SampleEvery time.Duration
	// SessionTTL is how long a console session lasts without a request;
	// 0 is 8 hours.
	SessionTTL time.Duration
}

// StageGauge is one stage's depth and the age of its oldest message.
type StageGauge struct {
	Stage    string   `json:"stage"`
	Messages int64    `json:"messages"`
	Oldest   *float64 `json:"oldest_age_seconds"`
	// Waiting counts, in inbox/ only, the data files waiting for their
	// done-file, not in Messages; WaitingOldest is the oldest one's age.
	// Both are left out when none waits.
	Waiting       int64    `json:"waiting_for_done_file,omitempty"`
	WaitingOldest *float64 `json:"oldest_waiting_for_done_file_age_seconds,omitempty"`
	// NotTaken counts, in inbox/ only, the entries the queue never takes
	// (not named as its messages are); left out when there are none.
	NotTaken int64 `json:"inbox_not_taken,omitempty"`
}

// Server serves the API and the console.
type Server struct {
	o        Options
	mu       sync.Mutex
	sessions map[string]*session
	counts   ledgerCounts
	runs     runs
	// hist is the charts' history (series.go), sampled from Start to
	// Close by one goroutine.
	hist         *history
	sampling     sync.WaitGroup
	stopSampling context.CancelFunc
	// folds folds the audit's rows of repeated refusals (refusals.go),
	// logins limits sign-ins per client address (logins.go).
	folds  *folder
	logins *loginLimiter
}

type session struct {
	id      task.Identity
	csrf    string
	expires time.Time
}

// Cookie and header names.
const (
	sessionCookie = "spool_session"
	csrfHeader    = "X-CSRF-Token"
)

// New checks o and returns its server.
func New(o Options) (*Server, error) {
	if o.Dir == nil || o.Ledger == nil || len(o.Tokens) == 0 || o.Tasks == nil {
		return nil, errors.New("console: a queue, its ledger, its tasks and tokens are required")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 8 * time.Hour
	}
	switch {
	case o.SampleEvery < 0:
		return nil, fmt.Errorf("console: sample every %v: want a duration above 0, or 0 for %v", o.SampleEvery, DefaultSampleEvery)
	case o.SampleEvery == 0:
		o.SampleEvery = DefaultSampleEvery
	}
	s := &Server{o: o, sessions: map[string]*session{}, logins: newLoginLimiter(), hist: newHistory(o.SampleEvery, time.Now())}
	s.folds = newFolder(foldWindow, foldKeys, s.writeFolded)
	return s, nil
}

// Register adds the API's and the console's routes to mux: /api/v1/...,
// /login, /logout, /assets/... and / (every path mux has no other route
// for).
func (s *Server) Register(mux *http.ServeMux) {
	api := func(pattern string, min task.Role, action string, h func(*request) (int, any)) {
		mux.Handle(pattern, s.endpoint(min, action, h))
	}
	api("GET /api/v1/session", task.RoleViewer, "", s.getSession)
	api("GET /api/v1/overview", task.RoleViewer, "", s.getOverview)
	api("GET /api/v1/series", task.RoleViewer, "", s.getSeries)
	api("GET /api/v1/charts", task.RoleViewer, "", s.getCharts)
	api("GET /api/v1/dead-letters", task.RoleViewer, "", s.getDeadLetters)
	api("GET /api/v1/dead-letters/groups", task.RoleViewer, "", s.getGroups)
	api("GET /api/v1/messages/{msg_id}", task.RoleViewer, "", s.getMessage)
	api("GET /api/v1/audit", task.RoleViewer, "", s.getAudit)
	api("GET /api/v1/tasks", task.RoleViewer, "", s.getTasks)
	api("GET /api/v1/tasks/{id}", task.RoleViewer, "", s.getTask)
	api("GET /api/v1/tasks/{id}/files", task.RoleViewer, "", s.getTaskFiles)
	api("POST /api/v1/replays", task.RoleOperator, "replay", s.postReplay)
	api("POST /api/v1/discards", task.RoleOperator, "discard", s.postDiscard)
	api("POST /api/v1/tasks/{id}/approve", task.RoleApprover, "approve", s.postApprove)
	api("POST /api/v1/tasks/{id}/cancel", task.RoleOperator, "cancel", s.postCancel)
	s.registerHolds(api)
	mux.Handle("/api/", s.endpoint(task.RoleViewer, "", func(*request) (int, any) {
		return http.StatusNotFound, apiError("no such endpoint")
	}))
	mux.HandleFunc("POST /login", s.login)
	mux.HandleFunc("POST /logout", s.logout)
	mux.Handle("GET /assets/", secure(assetHandler()))
	mux.Handle("GET /{$}", secure(http.HandlerFunc(s.index)))
	// The other methods of those paths: 405, audited (the API's are its
	// catch-all's 404).
	mux.Handle("/login", s.notAllowed("login", "POST"))
	mux.Handle("/logout", s.notAllowed("logout", "POST"))
	mux.Handle("/assets/", s.notAllowed("read", "GET, HEAD"))
	mux.Handle("/{$}", s.notAllowed("read", "GET, HEAD"))
}

// request is one authenticated API request.
type request struct {
	*http.Request
	w   http.ResponseWriter
	srv *Server
	id  task.Identity
	// action is the audited action of a POST.
	action string
}

// rawBody is an answer that is not JSON (GET charts' SVG): endpoint
// writes its bytes with its content type.
type rawBody struct {
	contentType string
	b           []byte
}

// apiError is the body of an error answer.
func apiError(format string, args ...any) map[string]string {
	return map[string]string{"error": fmt.Sprintf(format, args...)}
}

// endpoint authenticates, authorizes and runs h, writing what it returns
// as JSON. Its refusals (no identity, role too low, no CSRF token) are
// audited here, for every method, and so is a read's answer 4xx (a bad
// parameter, a 404: a request without action is "read" for GET and HEAD,
// else "request"); an action's outcome, refusals included, is audited by
// h.
func (s *Server) endpoint(min task.Role, action string, h func(*request) (int, any)) http.Handler {
	return secure(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = withClient(r)
		req := &request{Request: r, w: w, srv: s, action: action}
		asked := action
		if asked == "" {
			asked = "request"
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				asked = "read"
			}
		}
		id, viaCookie, ok := s.identify(r)
		if !ok {
			s.refuse(r.Context(), task.Identity{}, asked, pathOf(r), unknownWhy(r), "")
			w.Header().Set("WWW-Authenticate", `Bearer realm="spool"`)
			writeJSON(w, http.StatusUnauthorized, apiError("a token is required: Authorization: Bearer TOKEN, or sign in at /"))
			return
		}
		id.Client = clientOf(r.Context())
		req.id = id
		if id.Role < min {
			s.refuse(r.Context(), id, asked, pathOf(r), "role too low (403)", fmt.Sprintf("role %s may not %s: it needs %s", id.Role, asked, min))
			writeJSON(w, http.StatusForbidden, apiError("role %s may not do this: it needs %s", id.Role, min))
			return
		}
		if r.Method != http.MethodGet && viaCookie && !s.csrfOK(r) {
			s.refuse(r.Context(), id, asked, pathOf(r), "no CSRF token (403)", "a state change from a cookie session needs its CSRF token")
			writeJSON(w, http.StatusForbidden, apiError("a state change from the console needs its CSRF token (header %s)", csrfHeader))
			return
		}
		code, body := h(req)
		if action == "" && code >= 400 && code < 500 {
			s.refuse(r.Context(), id, asked, pathOf(r), statusReason(code), errorOf(body))
		}
		if raw, ok := body.(rawBody); ok {
			w.Header().Set("Content-Type", raw.contentType)
			w.WriteHeader(code)
			_, _ = w.Write(raw.b) // the client is gone: nothing to tell
			return
		}
		writeJSON(w, code, body)
	}))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// identify finds who r is from: its Bearer token, else its session
// cookie (viaCookie).
func (s *Server) identify(r *http.Request) (id task.Identity, viaCookie, ok bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, found := strings.CutPrefix(h, "Bearer ")
		if !found {
			return task.Identity{}, false, false
		}
		id, err := s.o.Tokens.Identify(strings.TrimSpace(tok))
		return id, false, err == nil
	}
	sess := s.session(r)
	if sess == nil {
		return task.Identity{}, false, false
	}
	return sess.id, true, true
}

// session is r's live session, its expiry renewed; nil without one.
func (s *Server) session(r *http.Request) *session {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[c.Value]
	now := time.Now()
	if sess == nil || now.After(sess.expires) {
		delete(s.sessions, c.Value)
		return nil
	}
	sess.expires = now.Add(s.o.SessionTTL)
	return sess
}

// csrfOK reports whether r carries its session's CSRF token.
func (s *Server) csrfOK(r *http.Request) bool {
	sess := s.session(r)
	got := r.Header.Get(csrfHeader)
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	return sess != nil && got != "" && constantEqual(got, sess.csrf)
}

// newSession starts a session for id and returns its cookie value.
func (s *Server) newSession(id task.Identity) (string, error) {
	key, err := randomString()
	if err != nil {
		return "", err
	}
	csrf, err := randomString()
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for k, v := range s.sessions { // drop the expired ones as sessions are made
		if now.After(v.expires) {
			delete(s.sessions, k)
		}
	}
	s.sessions[key] = &session{id: id, csrf: csrf, expires: now.Add(s.o.SessionTTL)}
	return key, nil
}

func randomString() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("session: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// record writes a closed audit row of id's action over HTTP; a failure is
// logged, the answer is sent anyway (the refusal changed nothing). A
// refusal of no task goes through refuse, folded by the reason its detail
// begins with ("bad body (400): ...").
func (s *Server) record(ctx context.Context, id task.Identity, action string, selection any, outcome string, counts ledger.AuditCounts, detail string, taskID int64) {
	if outcome == ledger.AuditRefused && taskID == 0 {
		reason, rest := reasonOf(detail)
		s.refuse(ctx, id, action, selectionOf(selection), reason, rest)
		return
	}
	e, err := s.entry(id, action, selection, taskID)
	if err == nil {
		_, err = s.o.Ledger.Audit().Record(context.WithoutCancel(ctx), e, outcome, counts, detail)
	}
	if err != nil {
		s.o.Log.Warn("audit", "err", err, "actor", id.Name, "action", action, "outcome", outcome)
	}
}

// entry is the audit entry of id's action over HTTP; its selection holds
// id's client address, as the Service's rows do.
func (s *Server) entry(id task.Identity, action string, selection any, taskID int64) (ledger.AuditEntry, error) {
	id.Via = ledger.AuditHTTP
	e, err := id.AuditEntry(action, selection, s.o.Host, s.o.PID)
	e.Task = taskID
	return e, err
}

// secure sets the headers every answer carries: nothing from another
// origin, no framing, no sniffing, no referrer, no caching.
func secure(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secureHeaders(w)
		h.ServeHTTP(w, r)
	})
}

// secureHeaders sets the headers of secure on w.
func secureHeaders(w http.ResponseWriter) {
	{
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
	}
}

// writeJSON writes v as JSON with code; <, > and & are escaped
// (\u003c...), so that a body read as HTML by mistake runs nothing.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client is gone: nothing to tell
}

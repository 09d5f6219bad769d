package console

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/task"
)

// Every refusal of a request (no token or an unknown one, a role too low,
// no CSRF token, a bad body or parameter, a 404 under /api/, a 405, a
// sign-in over its rate) is a row of the audit, with the client's
// address: the TCP peer's, never X-Forwarded-For or the like, which any
// client can write (behind a proxy, every refusal names the proxy).
//
// A flood of refusals must grow the audit by a bounded number of rows and
// take the ledger's write turn from the consumers no more than that, so
// they are folded. A refusal's key is its client, actor, role, action and
// reason. The first refusal of a key is written at once, as it was; the
// ones that follow are counted in memory and written as one row when the
// window ends (every foldWindow), with their number in counts.refused and
// the time of the first and the last as the row's at and ended_at. A key
// that folded some stays open for the next window, one that folded none
// is forgotten, so that the next refusal is written at once again: a
// steady flood writes one row a minute per key. At most foldKeys keys are
// held; the refusals of more clients are folded under the client "other
// addresses" (by actor, role, action and reason, a set the code and the
// token file bound, and past 2×foldKeys keys all in one). Close writes
// what is held.
//
// The folder's mutex guards its keys, its timer and closed. The timer's
// goroutine (time.AfterFunc, armed while keys are held) and Close write
// the rows of a window outside that mutex, one after the other
// (flushing), so that Close returns with every row written.

const (
	// foldWindow is how long a key's refusals are counted before they
	// are written as one row.
	foldWindow = time.Minute
	// foldKeys is how many keys are held at once, before the refusals
	// of more clients are folded under otherClients.
	foldKeys = 128
	// otherClients is the client of the rows that fold the refusals of
	// the clients over foldKeys.
	otherClients = "other addresses"
	// maxText bounds a path or a detail that a client chose, in a row.
	maxText = 256
)

// refusal is one refused request.
type refusal struct {
	id     task.Identity // Name empty when the client is not known
	client string
	action string
	// sel is what was asked (the path), without the client.
	sel map[string]string
	// reason is short and stable: the key's part ("unknown token
	// (401)"); detail the particulars of this one, maybe empty.
	reason, detail string
	at             time.Time
}

// foldKey is what refusals fold by.
type foldKey struct{ client, actor, role, action, reason string }

// folded is a key's refusals counted since its last row.
type folded struct {
	n           int64
	first, last time.Time
	// sel holds the fields of the selection every one of them had
	// alike; varied names the others.
	sel    map[string]string
	varied []string
}

func (f *folded) add(r refusal) {
	if f.n == 0 {
		f.first, f.sel = r.at, maps.Clone(r.sel)
	} else {
		for k, v := range f.sel {
			if r.sel[k] != v {
				delete(f.sel, k)
				f.varied = append(f.varied, k)
			}
		}
	}
	f.n++
	f.last = r.at
}

// foldedRow is the row of a key's window.
type foldedRow struct {
	key foldKey
	folded
}

// folder counts the refusals of each key; see above.
type folder struct {
	window time.Duration
	keys   int
	write  func([]foldedRow)

	mu     sync.Mutex
	open   map[foldKey]*folded
	timer  *time.Timer
	closed bool

	flushing sync.Mutex
}

func newFolder(window time.Duration, keys int, write func([]foldedRow)) *folder {
	return &folder{window: window, keys: keys, write: write, open: map[foldKey]*folded{}}
}

// add counts r and reports whether it is to be written at once: the
// first of its key in this window, or any once the folder is closed.
func (f *folder) add(r refusal) bool {
	k := foldKey{client: r.client, actor: r.id.Name, role: roleText(r.id), action: r.action, reason: r.reason}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return true
	}
	w := f.open[k]
	if w == nil && len(f.open) >= f.keys {
		k.client = otherClients
		w = f.open[k]
		if w == nil && len(f.open) >= 2*f.keys {
			// Reasons no code writes: one key for all, still bounded.
			k = foldKey{client: otherClients, action: "other", reason: "other refusals"}
			w = f.open[k]
		}
	}
	if w == nil {
		f.open[k] = &folded{}
		if f.timer == nil {
			f.timer = time.AfterFunc(f.window, f.tick)
		}
		return true
	}
	w.add(r)
	return false
}

// take ends the window: it returns the keys' rows, forgets the keys that
// folded none, and arms the timer again while keys are held and final is
// false.
func (f *folder) take(final bool) []foldedRow {
	f.mu.Lock()
	defer f.mu.Unlock()
	var rows []foldedRow
	for k, w := range f.open {
		if w.n == 0 {
			delete(f.open, k)
			continue
		}
		rows = append(rows, foldedRow{k, *w})
		f.open[k] = &folded{}
	}
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	if final {
		f.closed = true
	} else if len(f.open) > 0 {
		f.timer = time.AfterFunc(f.window, f.tick)
	}
	slices.SortFunc(rows, func(a, b foldedRow) int { return a.first.Compare(b.first) })
	return rows
}

func (f *folder) tick() {
	f.flushing.Lock()
	defer f.flushing.Unlock()
	if rows := f.take(false); len(rows) > 0 {
		f.write(rows)
	}
}

// close writes what is held and makes every later refusal a row of its
// own, written at once (a request still served while the server stops).
func (f *folder) close() {
	f.flushing.Lock()
	defer f.flushing.Unlock()
	if rows := f.take(true); len(rows) > 0 {
		f.write(rows)
	}
}

// refuse audits the refusal of the request whose context is ctx (its
// client put there by withClient): at once or folded, see above.
// id.Name is empty when the client is not known; reason is short and
// stable, detail the particulars.
func (s *Server) refuse(ctx context.Context, id task.Identity, action string, sel map[string]string, reason, detail string) {
	r := refusal{id: id, client: clientOf(ctx), action: action, sel: sel, reason: reason, detail: detail, at: time.Now()}
	if !s.folds.add(r) {
		return
	}
	text := clip(reason)
	if detail != "" {
		text += ": " + clip(detail)
	}
	e, err := s.refusalEntry(r.id.Name, roleText(r.id), r.action, r.client, r.sel, r.at)
	if err == nil {
		_, err = s.o.Ledger.Audit().Record(context.WithoutCancel(ctx), e, ledger.AuditRefused, ledger.AuditCounts{"refused": 1}, text)
	}
	if err != nil {
		s.o.Log.Warn("audit", "err", err, "actor", e.Actor, "action", action, "outcome", ledger.AuditRefused, "client", r.client)
	}
}

// writeFolded writes the rows of a window, each for the refusals of one
// key folded in it.
func (s *Server) writeFolded(rows []foldedRow) {
	for _, f := range rows {
		text := fmt.Sprintf("%s: refused %d times more (folded: one row a minute per client, action and reason)", f.key.reason, f.n)
		if f.key.client == otherClients {
			text += fmt.Sprintf(", from clients over the %d tracked at once", s.folds.keys)
		}
		if len(f.varied) > 0 {
			slices.Sort(f.varied)
			text += "; " + strings.Join(slices.Compact(f.varied), ", ") + " varied"
		}
		e, err := s.refusalEntry(f.key.actor, f.key.role, f.key.action, f.key.client, f.sel, f.first)
		if err == nil {
			ctx, done := context.WithTimeout(context.Background(), 10*time.Second)
			_, err = s.o.Ledger.Audit().RecordSpan(ctx, e, ledger.AuditRefused, ledger.AuditCounts{"refused": f.n}, text, f.last)
			done()
		}
		if err != nil {
			s.o.Log.Warn("audit", "err", err, "actor", e.Actor, "action", f.key.action, "outcome", ledger.AuditRefused,
				"client", f.key.client, "refused", f.n)
		}
	}
}

// refusalEntry is the audit entry of a refusal of client's request by
// actor ("" when not known, written "-") in role: its selection is sel
// with the client.
func (s *Server) refusalEntry(actor, role, action, client string, sel map[string]string, at time.Time) (ledger.AuditEntry, error) {
	all := map[string]string{"client": client}
	for k, v := range sel {
		all[k] = clip(v)
	}
	e, err := s.entry(task.Identity{Name: cmpOr(actor, "-")}, action, all, 0)
	e.Role, e.At = role, at
	return e, err
}

// roleText is id's role as the audit writes it: none for an unknown
// client.
func roleText(id task.Identity) string {
	if id.Name == "" {
		return ""
	}
	return id.Role.String()
}

// clip cuts s to maxText bytes, on a rune boundary.
func clip(s string) string {
	if len(s) <= maxText {
		return s
	}
	n := maxText
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// reasonOf splits a refusal's detail, "REASON: PARTICULARS", into the
// stable reason its rows fold by and the rest.
func reasonOf(detail string) (reason, rest string) {
	reason, rest, _ = strings.Cut(detail, ": ")
	return reason, rest
}

// selectionOf is a refusal's selection as a map of strings: sel itself,
// or its JSON under "selection".
func selectionOf(sel any) map[string]string {
	switch v := sel.(type) {
	case nil:
		return nil
	case map[string]string:
		return v
	}
	b, err := json.Marshal(sel)
	if err != nil {
		return nil
	}
	return map[string]string{"selection": string(b)}
}

// clientKey is the context key of the client's address.
type clientKey struct{}

// withClient is r with its client's address in its context: the host of
// r.RemoteAddr, the TCP peer.
func withClient(r *http.Request) *http.Request {
	if _, ok := r.Context().Value(clientKey{}).(string); ok {
		return r
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return r.WithContext(context.WithValue(r.Context(), clientKey{}, cmp.Or(host, "unknown")))
}

// clientOf is the client's address withClient put in ctx, "unknown"
// without one.
func clientOf(ctx context.Context) string {
	if c, ok := ctx.Value(clientKey{}).(string); ok {
		return c
	}
	return "unknown"
}

// pathOf is the selection of a refused request: its method and path.
func pathOf(r *http.Request) map[string]string {
	return map[string]string{"method": r.Method, "path": r.URL.Path}
}

// unknownWhy is the reason of a request with no identity: no token, one
// that is no token of the file, or a session cookie that is over.
func unknownWhy(r *http.Request) string {
	switch {
	case r.Header.Get("Authorization") != "":
		return "unknown token (401)"
	case hasCookie(r):
		return "no live session (401)"
	}
	return "no token (401)"
}

func hasCookie(r *http.Request) bool {
	c, err := r.Cookie(sessionCookie)
	return err == nil && c.Value != ""
}

// errorOf is the message of an error answer's body.
func errorOf(body any) string {
	switch b := body.(type) {
	case map[string]string:
		return b["error"]
	case map[string]any:
		if e, ok := b["error"].(string); ok {
			return e
		}
	}
	return ""
}

// statusReason is the reason of a refusal answered code: "not found
// (404)".
func statusReason(code int) string {
	return fmt.Sprintf("%s (%d)", strings.ToLower(http.StatusText(code)), code)
}

// refusal audits code and body, the answer of r's action, when it is a
// refusal (4xx) that the action's handler found itself, before the task
// service (which audits its own), and returns them.
func (r *request) refusal(code int, body any) (int, any) {
	if code >= 400 && code < 500 {
		r.srv.refuse(r.Context(), r.id, cmpOr(r.action, "request"), pathOf(r.Request), statusReason(code), errorOf(body))
	}
	return code, body
}

// notAllowed answers 405 for a method that path does not take (allow
// lists those it does), audited as a refusal of action.
func (s *Server) notAllowed(action, allow string) http.Handler {
	return secure(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = withClient(r)
		id, _, _ := s.identify(r)
		s.refuse(r.Context(), id, action, pathOf(r), "method not allowed (405)", "")
		w.Header().Set("Allow", allow)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}))
}

package console

import (
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/task"
)

//go:embed assets
var assets embed.FS

// assetHandler serves the embedded assets at /assets/.
func assetHandler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // a constant path in this package's own embed
	}
	return http.StripPrefix("/assets/", http.FileServer(http.FS(sub)))
}

var pages = template.Must(template.ParseFS(assets, "assets/*.html"))

// index serves the console to a signed-in session, else the sign-in page.
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if sess := s.session(r); sess != nil {
		_ = pages.ExecuteTemplate(w, "console.html", map[string]string{"Name": sess.id.Name, "Role": sess.id.Role.String(), "CSRF": sess.csrf})
		return
	}
	_ = pages.ExecuteTemplate(w, "login.html", map[string]string{})
}

// login signs in with the form's token: a session cookie (HttpOnly,
// SameSite=Strict, Secure when served over TLS) and a redirect to /. A
// wrong token is 401, a try over the client's rate (logins.go) 429 with
// Retry-After, each a refusal audited (refusals.go).
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r = withClient(r)
	if wait, ok := s.logins.allow(clientOf(r.Context())); !ok {
		secs := int(math.Ceil(wait.Seconds()))
		s.refuse(r.Context(), task.Identity{}, "login", nil, "too many sign-ins (429)",
			fmt.Sprintf("over %d a second from one address (%d at once): retry after %d s", loginRate, loginBurst, secs))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		loginPage(w, http.StatusTooManyRequests, fmt.Sprintf("Too many sign-ins from this address: try again in %d s.", secs))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	tok := strings.TrimSpace(r.PostFormValue("token"))
	id, err := s.o.Tokens.Identify(tok)
	if err != nil {
		s.refuse(r.Context(), task.Identity{}, "login", nil, "unknown token (401)", "")
		loginPage(w, http.StatusUnauthorized, "That token is not in the token file.")
		return
	}
	key, err := s.newSession(id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	id.Client = clientOf(r.Context()) // of this request, not of the session
	s.record(r.Context(), id, "login", nil, ledger.AuditOK, nil, "", 0)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: key, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(s.o.SessionTTL.Seconds())})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// loginPage answers the sign-in page with code and the error message.
func loginPage(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	secureHeaders(w)
	w.WriteHeader(code)
	_ = pages.ExecuteTemplate(w, "login.html", map[string]string{"Error": msg})
}

// logout ends the session (with its CSRF token) and clears the cookie.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	r = withClient(r)
	sess := s.session(r)
	if sess == nil || !s.csrfOK(r) {
		var id task.Identity
		reason := "no live session (403)"
		if sess != nil {
			id, reason = sess.id, "no CSRF token (403)"
		}
		s.refuse(r.Context(), id, "logout", nil, reason, "")
		secureHeaders(w)
		http.Error(w, "no session, or no CSRF token", http.StatusForbidden)
		return
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.mu.Lock()
		delete(s.sessions, c.Value)
		s.mu.Unlock()
	}
	s.record(r.Context(), sess.id, "logout", nil, ledger.AuditOK, nil, "", 0)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: -1})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

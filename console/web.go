package console

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"
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
// wrong token is 401 and an audit row refused.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	tok := strings.TrimSpace(r.PostFormValue("token"))
	id, err := s.o.Tokens.Identify(tok)
	if err != nil {
		s.record(r.Context(), task.Identity{Name: "-", Via: ledger.AuditHTTP}, "login", nil, ledger.AuditRefused, nil, "unknown token (401)", 0)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		secureHeaders(w)
		w.WriteHeader(http.StatusUnauthorized)
		_ = pages.ExecuteTemplate(w, "login.html", map[string]string{"Error": "That token is not in the token file."})
		return
	}
	key, err := s.newSession(id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.record(r.Context(), id, "login", nil, ledger.AuditOK, nil, "", 0)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: key, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(s.o.SessionTTL.Seconds())})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logout ends the session (with its CSRF token) and clears the cookie.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	sess := s.session(r)
	if sess == nil || !s.csrfOK(r) {
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

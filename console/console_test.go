package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/task"
)

func hash(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

func TestLoadTokens(t *testing.T) {
	dir := t.TempDir()
	for text, want := range map[string]string{
		"":                        "no identity",
		"# only a comment\n":      "no identity",
		"alice root " + hash("a"): "line 1",
	} {
		path := filepath.Join(dir, "tokens")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadTokens(path); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Errorf("LoadTokens of %q: %v, want an error naming the file and %q", text, err, want)
		}
	}
	if _, err := LoadTokens(filepath.Join(dir, "none")); err == nil {
		t.Error("LoadTokens of a missing file: no error")
	}
}

// newTestServer serves a queue with one dead letter whose body is
// <script>, to the tokens v (viewer), o (operator) and a (approver).
func newTestServer(t *testing.T, tls bool) (*httptest.Server, *ledger.DB) {
	s, l := newTestConsole(t)
	mux := http.NewServeMux()
	s.Register(mux)
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(mux)
	} else {
		srv = httptest.NewServer(mux)
	}
	t.Cleanup(srv.Close)
	return srv, l
}

// newTestConsole is the Server of newTestServer, not served.
func newTestConsole(t *testing.T) (*Server, *ledger.DB) {
	path := filepath.Join(t.TempDir(), "q")
	if err := queue.Init(path); err != nil {
		t.Fatal(err)
	}
	d, err := queue.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	l, err := sqlite.Open(context.Background(), filepath.Join(path, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	tk, err := task.ParseTokens(strings.NewReader(fmt.Sprintf("vic viewer %s\nolga operator %s\nada approver %s\n", hash("v"), hash("o"), hash("a"))))
	if err != nil {
		t.Fatal(err)
	}
	svc := &task.Service{Dir: d, Ledger: l, Contract: spool.DefaultContract(), Policy: task.NoPolicy, Host: "h", PID: 1}
	s, err := New(Options{Dir: d, Ledger: l, Tokens: tk, Tasks: svc, Host: "h", PID: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s, l
}

// TestLoginCookieCSRF: POST /login sets an HttpOnly SameSite=Strict
// session cookie, Secure over TLS only; a wrong token is 401 and
// audited; a state change from the cookie session without the page's
// CSRF token is 403 and audited, with it the request goes on.
func TestLoginCookieCSRF(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			srv, l := newTestServer(t, tls)
			c := srv.Client()
			c.Jar, _ = cookiejar.New(nil)
			c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

			res, err := c.PostForm(srv.URL+"/login", url.Values{"token": {"wrong"}})
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 401 || len(res.Cookies()) != 0 {
				t.Errorf("login with a wrong token: %d, cookies %v; want 401 and none", res.StatusCode, res.Cookies())
			}
			res, err = c.PostForm(srv.URL+"/login", url.Values{"token": {"o"}})
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
				t.Fatalf("login: %d, cookies %v", res.StatusCode, res.Cookies())
			}
			ck := res.Cookies()[0]
			if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure != tls {
				t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Secure=%v", ck, tls)
			}

			// The console page carries the CSRF token.
			res, err = c.Get(srv.URL + "/")
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(res.Body)
			res.Body.Close()
			m := regexp.MustCompile(`<meta name="csrf" content="([^"]+)">`).FindSubmatch(page)
			if m == nil {
				t.Fatalf("console page without its CSRF token:\n%s", page)
			}
			if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
				t.Errorf("Content-Security-Policy %q", csp)
			}

			post := func(csrf string) int {
				req, _ := http.NewRequest("POST", srv.URL+"/api/v1/tasks/1/cancel", strings.NewReader("{}"))
				if csrf != "" {
					req.Header.Set(csrfHeader, csrf)
				}
				res, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				return res.StatusCode
			}
			if code := post(""); code != 403 {
				t.Errorf("POST from the cookie session without CSRF token: %d, want 403", code)
			}
			if code := post("forged"); code != 403 {
				t.Errorf("POST with a wrong CSRF token: %d, want 403", code)
			}
			if code := post(string(m[1])); code == 401 || code == 403 {
				t.Errorf("POST with the CSRF token: %d, want past the checks", code)
			}

			rows, err := l.Audit().List(context.Background(), ledger.AuditQuery{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rows {
				got = append(got, fmt.Sprintf("%s/%s %s %s %s", r.Actor, r.Role, r.Via, r.Action, r.Outcome))
			}
			want := []string{"-/ http login refused", "token:olga/operator http login ok",
				"token:olga/operator http cancel refused", "token:olga/operator http cancel refused"}
			if len(got) < len(want) || strings.Join(got[:len(want)], "\n") != strings.Join(want, "\n") {
				t.Errorf("audit rows:\n%s\nwant first:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

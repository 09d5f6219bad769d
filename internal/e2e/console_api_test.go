//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// apiCall sends method path with body (JSON, "" for none) to base as the
// bearer of token ("" for none) and returns the status and the body.
func apiCall(t *testing.T, base, token, method, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// consoleAudit is the rows of spool audit --json after row id after, each
// as "actor role action outcome". Each row written over HTTP must hold
// the client's address, 127.0.0.1, in its selection.
func consoleAudit(t *testing.T, q string, after int64) ([]string, int64) {
	t.Helper()
	var rows []struct {
		ID                                int64
		Actor, Role, Via, Action, Outcome string
		Selection                         struct{ Client string }
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, "audit", q, "--json").stdout), &rows); err != nil {
		t.Fatal(err)
	}
	var out []string
	last := after
	for _, r := range rows {
		if r.ID <= after {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s %s %s", r.Actor, cmpDash(r.Role), r.Action, r.Outcome))
		if r.Via == "http" && r.Selection.Client != "127.0.0.1" {
			t.Errorf("audit row %d (%s %s %s) records the client %q, want 127.0.0.1", r.ID, r.Actor, r.Action, r.Outcome, r.Selection.Client)
		}
		last = r.ID
	}
	return out, last
}

func cmpDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// taskOf is the id and state of the task in a POST's answer.
func taskOf(t *testing.T, body string) (int64, string) {
	t.Helper()
	var tk struct {
		ID    int64
		State string
	}
	if err := json.Unmarshal([]byte(body), &tk); err != nil || tk.ID == 0 {
		t.Fatalf("no task in %q: %v", body, err)
	}
	return tk.ID, tk.State
}

// TestConsoleAuthorization is the API's authorization matrix through the
// binary: every identity (none, an unknown token, viewer, operator,
// approver) against every endpoint, with the status each gets and the
// audit rows each action and refusal writes: a refused read is one too,
// written at once the first time, and its repeats (the same client,
// action and reason) folded into a row written later.
func TestConsoleAuthorization(t *testing.T) {
	t.Parallel()
	q, base := consoleQueue(t, 5, 3)
	const (
		none, wrong = "", "not-a-token"
		viewer      = "vic-token"
		operator    = "olga-token"
		ada, abe    = "ada-token", "abe-token"
	)
	_, last := consoleAudit(t, q, 0)

	// Two waiting tasks: olga's and ada's (5 files, over replay_over 2).
	code, body := apiCall(t, base, operator, "POST", "/api/v1/replays", `{"reason": "missing-field", "note": "olga's"}`)
	if code != 201 {
		t.Fatalf("operator's replay: %d %s", code, body)
	}
	olgas, state := taskOf(t, body)
	var olgasTask struct{ Digest string }
	if err := json.Unmarshal([]byte(body), &olgasTask); err != nil || len(olgasTask.Digest) != 64 {
		t.Fatalf("olga's task without its digest: %v\n%s", err, body)
	}
	if state != "waiting" {
		t.Fatalf("a replay of 5 under replay_over 2: %s, want waiting", state)
	}
	code, body = apiCall(t, base, ada, "POST", "/api/v1/replays", `{"all": true, "detail_match": "required field", "note": "ada's"}`)
	if code != 201 {
		t.Fatalf("approver's replay: %d %s", code, body)
	}
	adas, _ := taskOf(t, body)
	got, last := consoleAudit(t, q, last)
	if want := "token:olga operator replay ok|token:ada approver replay ok"; strings.Join(got, "|") != want {
		t.Errorf("audit of the requests: %q, want %q", got, want)
	}

	reads := []string{"/api/v1/session", "/api/v1/overview", "/api/v1/dead-letters", "/api/v1/dead-letters?reason=parse&limit=2",
		"/api/v1/dead-letters/groups", "/api/v1/messages/broken-000.json", "/api/v1/tasks", fmt.Sprintf("/api/v1/tasks/%d", olgas), "/api/v1/audit"}
	type act struct {
		token, method, path, body string
		code                      int
		audit                     string // the rows it writes, |-separated
	}
	var acts []act
	for i, p := range reads {
		refused := ""
		if i == 0 {
			refused = "- - read refused"
		}
		acts = append(acts, act{none, "GET", p, "", 401, refused}, act{wrong, "GET", p, "", 401, refused},
			act{viewer, "GET", p, "", 200, ""}, act{operator, "GET", p, "", 200, ""}, act{ada, "GET", p, "", 200, ""})
	}
	dry := `{"reason": "parse", "dry_run": true}`
	approveOlgas := fmt.Sprintf("/api/v1/tasks/%d/approve", olgas)
	approveAdas := fmt.Sprintf("/api/v1/tasks/%d/approve", adas)
	cancelAdas := fmt.Sprintf("/api/v1/tasks/%d/cancel", adas)
	acts = append(acts,
		act{none, "POST", "/api/v1/replays", dry, 401, "- - replay refused"},
		act{wrong, "POST", "/api/v1/discards", dry, 401, "- - discard refused"},
		act{viewer, "POST", "/api/v1/replays", dry, 403, "token:vic viewer replay refused"},
		act{viewer, "POST", "/api/v1/discards", dry, 403, "token:vic viewer discard refused"},
		act{operator, "POST", "/api/v1/replays", dry, 200, ""},
		act{ada, "POST", "/api/v1/discards", `{"reason": "parse", "dry_run": true, "note": "a look"}`, 200, ""},
		act{operator, "POST", "/api/v1/replays", `{"reason": "parse", "bogus": 1}`, 400, "token:olga operator replay refused"},
		act{operator, "POST", "/api/v1/discards", `{"names": ["broken-000.json"], "note": "garbage"}`, 201, "token:olga operator discard ok"},
		act{none, "POST", approveOlgas, "", 401, "- - approve refused"},
		act{wrong, "POST", approveOlgas, "", 401, "- - approve refused"},
		act{viewer, "POST", approveOlgas, "", 403, "token:vic viewer approve refused"},
		act{operator, "POST", approveOlgas, "", 403, "token:olga operator approve refused"},
		act{ada, "POST", approveAdas, "", 403, "token:ada approver approve refused"}, // her own request
		act{viewer, "POST", cancelAdas, "", 403, "token:vic viewer cancel refused"},
		act{none, "POST", cancelAdas, "", 401, "- - cancel refused"},
		act{operator, "POST", cancelAdas, "", 200, "token:olga operator cancel ok"},
		act{abe, "POST", cancelAdas, "", 409, "token:abe approver cancel refused"}, // cancelled already
		act{abe, "POST", approveAdas, "", 409, "token:abe approver approve refused"},
		act{abe, "POST", approveOlgas, `{"digest": "` + olgasTask.Digest + `"}`, 200, "token:abe approver approve ok"},
		act{ada, "POST", "/api/v1/tasks/999/approve", "", 404, "token:ada approver approve refused"},
	)
	for _, a := range acts {
		code, body := apiCall(t, base, a.token, a.method, a.path, a.body)
		if code != a.code {
			t.Errorf("%s %s %s as %q: %d %s, want %d", a.method, a.path, a.body, a.token, code, body, a.code)
		}
		var rows []string
		if a.method != "GET" || a.audit != "" {
			rows, last = consoleAudit(t, q, last)
		}
		// A run an approval started writes rows of its own, in the
		// background, before or after the next action's: not an action's.
		rows = slices.DeleteFunc(rows, func(r string) bool {
			return strings.HasSuffix(r, " run ok") || strings.HasSuffix(r, " run started")
		})
		if strings.Join(rows, "|") != a.audit {
			t.Errorf("%s %s as %q: audit rows %q, want %q", a.method, a.path, a.token, rows, a.audit)
		}
	}
	waitFor(t, cmdTimeout, "olga's task, approved by abe, to put 5 files back in inbox/", func() bool { return countFiles(t, q, inbox) == 5 })
	if n := countFiles(t, q, errorStage); n != 4 {
		t.Errorf("%d files left in error/, want 4 (3 parse failures and the hostile one)", n)
	}
}

// TestServeAuthFlag: without --auth, serve has its metrics and health
// alone (no API, no console); a token file it cannot use is one line and
// exit 2, nothing served.
func TestServeAuthFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	q := filepath.Join(dir, "q")
	mustRun(t, 0, "init", q)
	_, base := startListening(t, "serve", q, "--listen", "127.0.0.1:0")
	for path, want := range map[string]int{"/metrics": 200, "/healthz": 200, "/api/v1/overview": 404, "/": 404, "/login": 404} {
		if code, _ := apiCall(t, base, "", "GET", path, ""); code != want {
			t.Errorf("serve without --auth: GET %s = %d, want %d", path, code, want)
		}
	}
	for name, text := range map[string]string{
		"empty":    "# nobody\n",
		"bad-role": "olga root " + sha256Hex("x") + "\n",
		"no-hash":  "token:olga operator x\n",
	} {
		path := tokenFile(t, dir, name, text)
		r := run(t, "serve", q, "--listen", "127.0.0.1:0", "--auth", path)
		if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, path) {
			t.Errorf("serve --auth %s (%s): exit %d, stderr %q; want 2 and one line naming the file", name, text, r.code, r.stderr)
		}
	}
}

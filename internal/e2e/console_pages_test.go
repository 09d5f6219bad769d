//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// inTimeZone makes ctx's browser tab live in the time zone tz and reloads
// its page, on which it waits for sel.
func inTimeZone(t *testing.T, ctx context.Context, tz, sel string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := chromedp.Call(tctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: tz}); err != nil {
		t.Fatalf("time zone %s: %v", tz, err)
	}
	do(t, ctx, "reload in "+tz, chromedp.Reload(), chromedp.WaitVisible(sel))
	if got := eval[string](t, ctx, `Intl.DateTimeFormat().resolvedOptions().timeZone`); got != tz {
		t.Fatalf("the browser's time zone is %q, want %q", got, tz)
	}
}

// noMissing fails t when ctx's page shows "null", "undefined" or "NaN"
// where a value is missing: a missing value is a dash, or left out.
func noMissing(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	if bad := eval[string](t, ctx, `(document.body.innerText.match(/\b(null|undefined|NaN)\b/) || [""])[0]`); bad != "" {
		t.Errorf("%s shows %q:\n%s", what, bad, eval[string](t, ctx, `document.body.innerText`))
	}
}

// openPage opens the console's page at hash ("#/audit?...") in ctx, in
// a document of its own, and waits for sel: a change of the address
// alone leaves the previous page shown until the new one is drawn, and
// sel could be found in it.
func openPage(t *testing.T, ctx context.Context, base, hash, sel string) {
	t.Helper()
	do(t, ctx, "open "+hash, chromedp.Navigate(base+"/"+hash), chromedp.Reload(), chromedp.WaitVisible(sel))
}

// fillAndApply sets the page's input #id to value and submits its filter
// with #apply, until the page's address holds key=: the page just opened
// may still be drawing its form (a node found before it was drawn again
// cannot take a value), so the value is set and the form sent in one
// step, again until it took.
func fillAndApply(t *testing.T, ctx context.Context, what, id, value, apply, key string) {
	t.Helper()
	waitTrue(t, ctx, what, fmt.Sprintf(`(() => {
		if (location.hash.includes(%q)) return true;
		const i = document.getElementById(%q), b = document.getElementById(%q);
		if (i && b) { i.value = %q; b.click(); }
		return false;
	})()`, key+"=", id, apply, value))
}

// nextSecond waits until the clock is past the next whole second and
// returns that second: what happens after it is dead-lettered at or
// after it, what happened before, before it.
func nextSecond(t *testing.T) time.Time {
	t.Helper()
	s := time.Now().Truncate(time.Second).Add(time.Second)
	waitFor(t, 5*time.Second, "the next second", func() bool { return time.Now().After(s) })
	return s
}

// taskHref is the address of the task an action bar (its ids' prefix)
// says it asked for, as "#/task/N", with N.
func taskHref(t *testing.T, ctx context.Context, prefix string) (string, int64) {
	t.Helper()
	href := eval[string](t, ctx, `document.querySelector("#`+prefix+`action-result a.task-link, #`+prefix+`notice a.task-link").getAttribute("href")`)
	var id int64
	if _, err := fmt.Sscanf(href, "#/task/%d", &id); err != nil {
		t.Fatalf("task link %q: %v", href, err)
	}
	return href, id
}

// param is the value of a task page's parameter key.
func param(t *testing.T, ctx context.Context, key string) string {
	t.Helper()
	return eval[string](t, ctx, `document.querySelector('#task-params tr[data-param="`+key+`"] td').textContent`)
}

// approveOnPage approves the task at href on its page as the approver of
// ctx: the confirm step names the digest the page shows, which the
// approval sends; it waits for the task to be done.
func approveOnPage(t *testing.T, ctx context.Context, base, href, out, name string) {
	t.Helper()
	do(t, ctx, "the task page", chromedp.Navigate(base+"/"+href), chromedp.WaitVisible("#approve"))
	shown := text(t, ctx, "#task-digest")
	do(t, ctx, "approve", chromedp.Click("#approve"), chromedp.WaitVisible("#approve-confirm-yes"))
	if got := text(t, ctx, "#approve-digest"); got != shown || len(got) != 64 {
		t.Errorf("the confirm step names digest %q, the page shows %q", got, shown)
	}
	shot(t, ctx, out, name+"-confirm")
	do(t, ctx, "confirm", chromedp.Click("#approve-confirm-yes"))
	waitTrue(t, ctx, "the task done", `document.getElementById("task-state").textContent === "done"`)
	shot(t, ctx, out, name+"-done")
	noMissing(t, ctx, "the task page, done")
}

// apiTask is GET /api/v1/tasks/ID as token.
type apiTask struct {
	ID       int64
	State    string
	Digest   string
	Files    int
	By       string
	Request  struct{ Note string }
	FileList struct {
		Items []struct{ File string }
		Total int
	} `json:"file_list"`
}

func getTask(t *testing.T, base, token string, id int64) apiTask {
	t.Helper()
	code, body := apiCall(t, base, token, "GET", fmt.Sprintf("/api/v1/tasks/%d", id), "")
	var tk apiTask
	if err := json.Unmarshal([]byte(body), &tk); code != 200 || err != nil {
		t.Fatalf("GET task %d: %d %v\n%s", id, code, err, body)
	}
	return tk
}

// TestConsoleDiscardAllMatching: "Discard all matching" on the dead
// letters page dry-runs with the note (the server refuses a discard
// without one, dry runs included) and asks the discard of what the
// filter lists; an approver approves it and the files leave error/.
// Without a note the page asks for one before it sends anything.
func TestConsoleDiscardAllMatching(t *testing.T) {
	t.Parallel()
	alloc := browser(t)
	out := t.ArtifactDir()
	q, base := consoleQueue(t, 2, 3)

	op := consoleSession(t, alloc, base, "olga-token")
	do(t, op, "parse failures", chromedp.Navigate(base+"/#/dead-letters?reason=parse"))
	// 3 and the hostile one, whose body is a <script>.
	waitTrue(t, op, "the 4 parse failures", `document.querySelectorAll("tr.dead-letter").length === 4`)
	do(t, op, "dry run", chromedp.SendKeys("#note", "garbage from the old producer"), chromedp.Click("#discard-all"),
		chromedp.WaitVisible("#dry-run-count"))
	if got := text(t, op, "#dry-run-count"); got != "4 dead letters match" {
		t.Errorf("dry-run count: %q, want 4 dead letters match", got)
	}
	shot(t, op, out, "2-discard-dry-run")
	do(t, op, "ask", chromedp.Click("#confirm-discard"), chromedp.WaitVisible("#task-created"))
	waitTrue(t, op, "the task waiting", `document.getElementById("task-created").textContent.includes("waiting for an approver")`)
	noMissing(t, op, "the dead letters page after the discard was asked")
	href, id := taskHref(t, op, "")
	if n := countFiles(t, q, errorStage); n != 6 {
		t.Fatalf("%d files in error/ before the approval, want all 6", n)
	}

	ada := consoleSession(t, alloc, base, "ada-token")
	approveOnPage(t, ada, base, href, out, "3-discard-approved")
	if got := param(t, ada, "note"); got != "garbage from the old producer" {
		t.Errorf("the task's note: %q", got)
	}
	waitFor(t, cmdTimeout, "the 4 parse failures gone from error/", func() bool { return countFiles(t, q, errorStage) == 2 })
	// Without a note, the page says so before it asks anything.
	openPage(t, op, base, "#/dead-letters", "#discard-all")
	do(t, op, "discard without a note", chromedp.Click("#discard-all"), chromedp.WaitVisible("#need-note"))
	shot(t, op, out, "1-discard-needs-a-note")
	if tk := getTask(t, base, "ada-token", id); tk.Files != 4 || tk.Request.Note != "garbage from the old producer" {
		t.Errorf("task %d: %+v, want 4 files and the note", id, tk)
	}
}

// TestConsoleDryRunOfNothing: a dry run that selects nothing says so,
// with no "null" in it and nothing to confirm.
func TestConsoleDryRunOfNothing(t *testing.T) {
	t.Parallel()
	alloc := browser(t)
	out := t.ArtifactDir()
	_, base := consoleQueue(t, 2, 1)
	op := consoleSession(t, alloc, base, "olga-token")
	do(t, op, "a filter of nothing", chromedp.Navigate(base+"/#/dead-letters?detail=no+such+detail"))
	waitTrue(t, op, "the empty list", `!!document.getElementById("dead-letter-rows") && document.querySelectorAll("tr.dead-letter").length === 0`)
	do(t, op, "dry run", chromedp.Click("#replay-all"), chromedp.WaitVisible("#dry-run-count"))
	if got := text(t, op, "#action-result"); got != "0 dead letters match: nothing to replay." {
		t.Errorf("dry run of nothing: %q", got)
	}
	if n := eval[int](t, op, `document.querySelectorAll("#confirm-replay").length`); n != 0 {
		t.Errorf("a dry run of nothing offers %d confirm buttons", n)
	}
	shot(t, op, out, "dry-run-of-nothing")
	noMissing(t, op, "the dry run of nothing")
}

// TestConsoleTimeZone: with the browser in Asia/Tokyo, the dead letters
// page's since and until select the same dead letters in the list and in
// the task a replay of them asks for: the page sends both the same time,
// with its offset.
func TestConsoleTimeZone(t *testing.T) {
	t.Parallel()
	alloc := browser(t)
	out := t.ArtifactDir()
	q, base := consoleQueue(t, 2, 2) // 5 dead letters, the hostile one included
	at := nextSecond(t)
	for i := range 6 {
		putMessage(t, q, fmt.Sprintf("late-%03d.json", i), `{"msg_id":`)
	}
	mustRun(t, 0, "consume", q)
	// The premise: the first 5 were dead-lettered before at, the 6 late
	// ones at or after it.
	code, body := apiCall(t, base, "vic-token", "GET", "/api/v1/dead-letters?limit=100", "")
	var list struct{ Items []struct{ File, At string } }
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list.Items) != 11 {
		t.Fatalf("dead letters: %d %v, %d items\n%s", code, err, len(list.Items), body)
	}
	for _, it := range list.Items {
		when, err := time.Parse(time.RFC3339Nano, it.At)
		if err != nil || strings.HasPrefix(it.File, "late-") != !when.Before(at) {
			t.Fatalf("%s dead-lettered at %s (%v), the boundary is %s", it.File, it.At, err, at)
		}
	}

	op := consoleSession(t, alloc, base, "olga-token")
	inTimeZone(t, op, "Asia/Tokyo", "#who")
	tokyo := at.In(time.FixedZone("JST", 9*3600)).Format("2006-01-02T15:04:05")
	do(t, op, "dead letters", chromedp.Navigate(base+"/#/dead-letters"), chromedp.WaitVisible("#filter-since"))
	waitTrue(t, op, "every dead letter", `document.querySelectorAll("tr.dead-letter").length === 11`)

	for _, c := range []struct {
		field, name string
		n           int
		late        bool
	}{
		{"since", "since", 6, true},
		{"until", "until", 5, false},
	} {
		openPage(t, op, base, "#/dead-letters", "#filter-"+c.field)
		fillAndApply(t, op, "filter "+c.name, "filter-"+c.field, tokyo, "filter-apply", c.field)
		waitTrue(t, op, fmt.Sprintf("%d dead letters %s %s Tokyo time", c.n, c.name, tokyo),
			fmt.Sprintf(`document.querySelectorAll("tr.dead-letter").length === %d`, c.n))
		waitTrue(t, op, c.name+" in the address with its offset", `decodeURIComponent(location.hash).includes("`+c.field+`=`+tokyo+`+09:00")`)
		listed := eval[[]string](t, op, `[...document.querySelectorAll("tr.dead-letter td:first-child")].map(td => td.textContent)`)
		do(t, op, "dry run", chromedp.SendKeys("#note", "after the fix"), chromedp.Click("#replay-all"), chromedp.WaitVisible("#dry-run-count"))
		if got, want := text(t, op, "#dry-run-count"), fmt.Sprintf("%d dead letters match", c.n); got != want {
			t.Errorf("%s %s: dry run %q, want %q", c.name, tokyo, got, want)
		}
		shot(t, op, out, "tokyo-"+c.name)
		do(t, op, "ask", chromedp.Click("#confirm-replay"), chromedp.WaitVisible("#task-created"))
		_, id := taskHref(t, op, "")
		var set []string
		for _, f := range getTask(t, base, "olga-token", id).FileList.Items {
			set = append(set, f.File)
			if strings.HasPrefix(f.File, "late-") != c.late {
				t.Errorf("%s %s: the task selects %s", c.name, tokyo, f.File)
			}
		}
		slices.Sort(set)
		slices.Sort(listed)
		if !slices.Equal(set, listed) {
			t.Errorf("%s %s: the list shows %q, the task selects %q", c.name, tokyo, listed, set)
		}
		noMissing(t, op, "the dead letters page in Tokyo")
		// Cancel it: the next filter asks for other files.
		if code, body := apiCall(t, base, "olga-token", "POST", fmt.Sprintf("/api/v1/tasks/%d/cancel", id), ""); code != 200 {
			t.Fatalf("cancel task %d: %d %s", id, code, body)
		}
	}
	// The task page shows the filter in the browser's time.
	openPage(t, op, base, "#/tasks", "tr.task")
	waitTrue(t, op, "the filter in Tokyo time", `document.querySelector("tr.task").textContent.includes("until `+strings.Replace(tokyo, "T", " ", 1)+`")`)
	shot(t, op, out, "tokyo-tasks")
	if got := text(t, op, "#zone"); !strings.Contains(got, "Asia/Tokyo (UTC+09:00)") {
		t.Errorf("the page's zone: %q", got)
	}
}

// TestConsoleMessageActions: a message's page replays or discards that
// one dead letter (a task of one name): the replay runs at once under
// the policy and the page shows the file in inbox/; the discard asks for
// a note and waits for an approver, and is cancelled on the tasks page.
func TestConsoleMessageActions(t *testing.T) {
	t.Parallel()
	alloc := browser(t)
	out := t.ArtifactDir()
	q, base := consoleQueue(t, 2, 2)
	op := consoleSession(t, alloc, base, "olga-token")

	do(t, op, "a dead letter's page", chromedp.Navigate(base+"/#/message/order-001.json"), chromedp.WaitVisible("#msg-replay"))
	shot(t, op, out, "1-message")
	noMissing(t, op, "a dead letter's page")
	do(t, op, "dry run", chromedp.Click("#msg-replay"), chromedp.WaitVisible("#msg-dry-run-count"))
	if got := text(t, op, "#msg-action-result"); !strings.HasPrefix(got, "1 dead letter matches; it runs at once.") {
		t.Errorf("the message's dry run: %q", got)
	}
	do(t, op, "replay", chromedp.Click("#msg-confirm-replay"))
	waitFor(t, cmdTimeout, "order-001.json back in inbox/", func() bool { return exists(filepath.Join(q, inbox, "order-001.json")) })
	waitTrue(t, op, "the page redrawn with the file in inbox/", `document.getElementById("places").textContent.includes("inbox/order-001.json")
		&& document.getElementById("msg-notice").textContent.includes("done: 1 moved")`)
	if n := eval[int](t, op, `document.querySelectorAll("#msg-replay").length`); n != 0 {
		t.Error("the page still offers to replay a message no longer in error/")
	}
	shot(t, op, out, "2-message-replayed")
	noMissing(t, op, "the replayed message's page")
	_, id := taskHref(t, op, "msg-")
	if tk := getTask(t, base, "olga-token", id); tk.State != "done" || tk.Files != 1 || len(tk.FileList.Items) != 1 || tk.FileList.Items[0].File != "order-001.json" {
		t.Errorf("the message's replay task: %+v, want done with order-001.json alone", tk)
	}

	openPage(t, op, base, "#/message/broken-001.json", "#msg-discard")
	do(t, op, "discard without a note", chromedp.Click("#msg-discard"), chromedp.WaitVisible("#msg-need-note"))
	do(t, op, "discard", chromedp.SendKeys("#msg-note", "truncated by the old uploader"), chromedp.Click("#msg-discard"),
		chromedp.WaitVisible("#msg-confirm-discard"))
	if got := text(t, op, "#msg-action-result"); !strings.Contains(got, "wait for an approver") {
		t.Errorf("the message's discard dry run: %q", got)
	}
	do(t, op, "ask", chromedp.Click("#msg-confirm-discard"))
	waitTrue(t, op, "the discard waiting", `!!document.getElementById("msg-notice") && document.getElementById("msg-notice").textContent.includes("waiting for an approver")`)
	shot(t, op, out, "3-message-discard-waiting")
	_, id = taskHref(t, op, "msg-")
	if tk := getTask(t, base, "olga-token", id); tk.State != "waiting" || len(tk.FileList.Items) != 1 || tk.FileList.Items[0].File != "broken-001.json" ||
		tk.Request.Note != "truncated by the old uploader" {
		t.Errorf("the message's discard task: %+v", tk)
	}
	if !exists(filepath.Join(q, errorStage, "broken-001.json")) {
		t.Error("broken-001.json left error/ before an approval")
	}

	// She thinks again: Cancel on the tasks page, confirmed.
	openPage(t, op, base, "#/tasks", fmt.Sprintf("#task-%d button.cancel", id))
	do(t, op, "cancel", chromedp.Click(fmt.Sprintf("#task-%d button.cancel", id)), chromedp.WaitVisible(fmt.Sprintf("#cancel-%d-yes", id)))
	shot(t, op, out, "4-tasks-cancel-confirm")
	do(t, op, "confirm", chromedp.Click(fmt.Sprintf("#cancel-%d-yes", id)))
	waitTrue(t, op, "the task cancelled in the list", fmt.Sprintf(`document.querySelector("#task-%d td.state").textContent === "cancelled"`, id))
	if tk := getTask(t, base, "olga-token", id); tk.State != "cancelled" {
		t.Errorf("task %d after the cancel: %s", id, tk.State)
	}
}

// TestConsoleTaskPage: a task's page shows every parameter an approver
// approves and its files a page at a time, and approves with the digest
// it shows, after a confirm step.
func TestConsoleTaskPage(t *testing.T) {
	t.Parallel()
	alloc := browser(t)
	out := t.ArtifactDir()
	q, base := consoleQueue(t, 105, 0)
	code, body := apiCall(t, base, "olga-token", "POST", "/api/v1/replays",
		`{"reason": "missing-field", "note": "fixed the producer", "rate": 1000}`)
	if code != 201 {
		t.Fatalf("replay: %d %s", code, body)
	}
	id, _ := taskOf(t, body)
	asked := getTask(t, base, "olga-token", id)

	// The operator who asked sees it, with no approval to give.
	op := consoleSession(t, alloc, base, "olga-token")
	do(t, op, "her task", chromedp.Navigate(fmt.Sprintf("%s/#/task/%d", base, id)), chromedp.WaitVisible("#task-params"))
	if n := eval[int](t, op, `document.querySelectorAll("#approve").length`); n != 0 {
		t.Error("the requester is offered to approve her own task")
	}

	ada := consoleSession(t, alloc, base, "ada-token")
	do(t, ada, "the task page", chromedp.Navigate(fmt.Sprintf("%s/#/task/%d", base, id)), chromedp.WaitVisible("#task-params"))
	for key, want := range map[string]string{
		"kind":         "replay",
		"state":        "waiting",
		"files":        "105 files",
		"by":           "token:olga (operator), via http",
		"note":         "fixed the producer",
		"selection":    "reason missing-field",
		"since":        "\u2014",
		"detail_match": "\u2014",
		"to":           "\u2014 (back to inbox/)",
		"force":        "no",
		"rate":         "1000 files a second",
		"digest":       asked.Digest,
		"approved_by":  "not yet",
	} {
		if got := param(t, ada, key); got != want {
			t.Errorf("parameter %s: %q, want %q", key, got, want)
		}
	}
	if got := text(t, ada, "#task-files-range"); got != "files 1\u2013100 of 105" {
		t.Errorf("files shown: %q", got)
	}
	first := eval[[]string](t, ada, `[...document.querySelectorAll("tr.task-file td:nth-child(2)")].map(td => td.textContent)`)
	if len(first) != 100 {
		t.Errorf("%d files on the first page, want 100", len(first))
	}
	shot(t, ada, out, "1-task-waiting")
	noMissing(t, ada, "the task page")
	do(t, ada, "next files", chromedp.Click("#files-next"))
	waitTrue(t, ada, "the second page", `document.getElementById("task-files-range").textContent === "files 101\u2013105 of 105"`)
	second := eval[[]string](t, ada, `[...document.querySelectorAll("tr.task-file td:nth-child(2)")].map(td => td.textContent)`)
	all := append(slices.Clone(first), second...)
	slices.Sort(all)
	if len(second) != 5 || len(slices.Compact(all)) != 105 {
		t.Errorf("second page %q: want the 5 files the first did not show", second)
	}
	if !eval[bool](t, ada, `document.getElementById("files-next").disabled`) {
		t.Error("the last page offers a next one")
	}
	shot(t, ada, out, "2-task-files-page-2")
	do(t, ada, "previous files", chromedp.Click("#files-prev"))
	waitTrue(t, ada, "the first page again", `document.querySelectorAll("tr.task-file").length === 100`)

	// Back from the confirm step approves nothing.
	do(t, ada, "approve, then back", chromedp.Click("#approve"), chromedp.WaitVisible("#approve-confirm-back"),
		chromedp.Click("#approve-confirm-back"), chromedp.WaitVisible("#approve"))
	if tk := getTask(t, base, "ada-token", id); tk.State != "waiting" {
		t.Fatalf("back from the confirm step: task %s", tk.State)
	}
	approveOnPage(t, ada, base, fmt.Sprintf("#/task/%d", id), out, "3-task")
	if got := param(t, ada, "approved_by"); !strings.HasPrefix(got, "token:ada, ") {
		t.Errorf("approved by: %q", got)
	}
	if got := param(t, ada, "progress"); got != "105 begun, 105 moved, 0 gone, 0 changed and left" {
		t.Errorf("progress: %q", got)
	}
	if n := countFiles(t, q, inbox); n != 105 {
		t.Errorf("%d files in inbox/, want 105", n)
	}
}

// TestConsoleAuditPage: the audit page filters by actor (a bare name in
// every realm), action, outcome and a time range, and pages through the
// rows, older and newer.
func TestConsoleAuditPage(t *testing.T) {
	t.Parallel()
	alloc := browser(t)
	out := t.ArtifactDir()
	_, base := consoleQueue(t, 12, 0)
	replay := func(i int) {
		t.Helper()
		code, body := apiCall(t, base, "olga-token", "POST", "/api/v1/replays", fmt.Sprintf(`{"names": ["order-%03d.json"]}`, i))
		if code != 201 {
			t.Fatalf("replay %d: %d %s", i, code, body)
		}
	}
	for i := range 6 {
		replay(i)
	}
	at := nextSecond(t)
	for i := 6; i < 12; i++ {
		replay(i)
	}
	if code, _ := apiCall(t, base, "vic-token", "POST", "/api/v1/replays", `{"all": true}`); code != 403 {
		t.Fatalf("the viewer's replay: %d, want 403", code)
	}

	ada := consoleSession(t, alloc, base, "ada-token")
	inTimeZone(t, ada, "Asia/Tokyo", "#who")
	do(t, ada, "audit", chromedp.Click("#nav-audit"), chromedp.WaitVisible("tr.audit-row"))
	shot(t, ada, out, "1-audit")
	noMissing(t, ada, "the audit page")

	rows := func() []string {
		return eval[[]string](t, ada, `[...document.querySelectorAll("tr.audit-row")].map(r =>
			r.querySelector("td.actor").textContent + " " + r.querySelector("td.action").textContent + " " + r.querySelector("td.outcome").textContent)`)
	}
	ids := func() []string {
		return eval[[]string](t, ada, `[...document.querySelectorAll("tr.audit-row")].map(r => r.dataset.id)`)
	}
	want := func(what string, n int, row string) []string {
		t.Helper()
		waitTrue(t, ada, what, fmt.Sprintf(`document.querySelectorAll("tr.audit-row").length === %d`, n))
		got := rows()
		for _, r := range got {
			if r != row {
				t.Errorf("%s: row %q, want only %q", what, r, row)
				break
			}
		}
		return ids()
	}
	do(t, ada, "filter olga's replays", chromedp.SendKeys("#audit-actor", "olga"), chromedp.SendKeys("#audit-action", "replay"),
		chromedp.SetValue("#audit-outcome", "ok"), chromedp.SetValue("#audit-limit", "10"), chromedp.Click("#audit-apply"))
	page1 := want("a page of 10 of olga's replays", 10, "token:olga (operator) replay ok")
	shot(t, ada, out, "2-audit-filtered")
	noMissing(t, ada, "the filtered audit page")
	if n := eval[int](t, ada, `document.querySelectorAll("#audit-newer").length`); n != 0 {
		t.Error("the newest page offers newer rows")
	}
	do(t, ada, "older", chromedp.Click("#audit-older"))
	page2 := want("the 2 older replays", 2, "token:olga (operator) replay ok")
	if n := eval[int](t, ada, `document.querySelectorAll("#audit-older").length`); n != 0 {
		t.Error("the oldest page offers older rows")
	}
	shot(t, ada, out, "3-audit-older")
	if slices.ContainsFunc(page2, func(id string) bool { return slices.Contains(page1, id) }) {
		t.Errorf("older page %v repeats rows of the first %v", page2, page1)
	}
	do(t, ada, "newer", chromedp.Click("#audit-newer"))
	waitTrue(t, ada, "the first page again", `document.querySelectorAll("tr.audit-row").length === 10`)
	if got := ids(); !slices.Equal(got, page1) {
		t.Errorf("newer page %v, want the first %v", got, page1)
	}

	// Since the second, in Tokyo time: the 6 later replays.
	tokyo := at.In(time.FixedZone("JST", 9*3600)).Format("2006-01-02T15:04:05")
	openPage(t, ada, base, "#/audit?actor=olga&action=replay", "#audit-since")
	fillAndApply(t, ada, "since", "audit-since", tokyo, "audit-apply", "since")
	want("olga's replays since "+tokyo+" Tokyo time", 6, "token:olga (operator) replay ok")
	openPage(t, ada, base, "#/audit?actor=olga&action=replay", "#audit-until")
	fillAndApply(t, ada, "until", "audit-until", tokyo, "audit-apply", "until")
	want("olga's replays until "+tokyo+" Tokyo time", 6, "token:olga (operator) replay ok")
	openPage(t, ada, base, "#/audit?outcome=refused", "tr.audit-row")
	want("the refusals", 1, "token:vic (viewer) replay refused")
	shot(t, ada, out, "4-audit-refused")
}

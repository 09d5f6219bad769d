//go:build linux

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/spoolq/spool/internal/testenv"
)

// chromiumEnv names the Chromium the browser tests drive (.ci/run sets it
// to Debian's chromium).
const chromiumEnv = "SPOOL_TEST_CHROMIUM"

// sharedBrowser is the package's one headless Chromium, started by the
// first browser test and stopped after the last (closeBrowser, from
// runMain). The browser tests run in parallel, and a Chromium each,
// with its own GPU, network and renderer processes, cost more of a
// two-core machine's time than the tests themselves; each test's
// sessions are browser contexts of their own in it (consoleSession), as
// separate as two profiles, so sharing the process shares no cookie nor
// storage.
var sharedBrowser struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	err    error
}

// browser returns the shared headless Chromium, started on first use, or
// skips (fails on CI) without one.
func browser(t *testing.T) context.Context {
	t.Helper()
	exe := os.Getenv(chromiumEnv)
	if exe == "" {
		testenv.Missing(t, "skipped: set "+chromiumEnv+" to a Chromium, e.g. "+chromiumEnv+"=/usr/bin/chromium (apt-get install chromium)")
	}
	b := &sharedBrowser
	b.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
			chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-gpu", true))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancelCtx := chromedp.NewContext(alloc)
		b.ctx, b.cancel = ctx, func() { cancelCtx(); cancelAlloc() }
		// The first run starts the browser: no timeout on it (see
		// chromedp.Run).
		b.err = chromedp.Do(ctx, chromedp.Navigate("about:blank"))
	})
	if b.err != nil {
		t.Fatalf("start %s: %v", exe, b.err)
	}
	return b.ctx
}

// closeBrowser stops the shared Chromium, if a test started it.
func closeBrowser() {
	if sharedBrowser.cancel != nil {
		sharedBrowser.cancel()
	}
}

// consoleSession signs in at base with token in a new browser context
// and returns it, on the console's overview.
func consoleSession(t *testing.T, alloc context.Context, base, token string) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// The first run makes the tab, which lives as long as the context of
	// that run: no timeout on it.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("open %s: %v", base, err)
	}
	do(t, ctx, "sign in", chromedp.WaitVisible("#token"), chromedp.SendKeys("#token", token),
		chromedp.Click("#signin"), chromedp.WaitVisible("#who"), chromedp.WaitVisible("#stage-inbox"))
	return ctx
}

// do runs actions in ctx within a minute, failing t with what on error.
func do(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(tctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// text is the text of the first element sel selects.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	s, err := chromedp.Run(tctx, chromedp.Text(sel))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// eval evaluates a JavaScript expression in ctx's page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitTrue waits for expr to be true in ctx's page.
func waitTrue(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if !poll(30*time.Second, 100*time.Millisecond, func() bool { return eval[bool](t, ctx, expr) }) {
		t.Fatalf("waited 30 s for %s (%s)", what, expr)
	}
}

// shot saves a screenshot of ctx's whole page as name.png in dir.
func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// A page that is not its window's active tab gets no frames: a
	// screenshot of it waits for ever.
	if _, err := chromedp.Call(tctx, page.BringToFront, cdp.Empty{}); err != nil {
		t.Fatalf("bring %s to front: %v", name, err)
	}
	b, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
}

// consoleQueue makes a queue with dead letters for the console's tests:
// parse failures, missing-field ones and a file whose body is a <script>,
// a token file of viewer vic, operator olga and approvers ada and abe,
// and starts serve --auth on it. It returns the queue and the base URL.
func consoleQueue(t *testing.T, missing, parse int) (string, string) {
	t.Helper()
	q, base, _ := consoleServe(t, missing, parse)
	return q, base
}

// consoleServe is consoleQueue, with the serve process.
func consoleServe(t *testing.T, missing, parse int) (string, string, *proc) {
	t.Helper()
	dir := t.TempDir()
	q := filepath.Join(dir, "q")
	mustRun(t, 0, "init", q)
	for i := range missing {
		putMessage(t, q, fmt.Sprintf("order-%03d.json", i), `{"order_no":"o-1","seq":1,"amount":"1.00"}`)
	}
	for i := range parse {
		putMessage(t, q, fmt.Sprintf("broken-%03d.json", i), `{"msg_id":`)
	}
	putMessage(t, q, "<img src=x onerror=window.pwned=1>.json", `<script>document.title="pwned";window.pwned=1</script>`)
	mustRun(t, 0, "consume", q)
	// Four eyes for a replay of more than 2 files.
	writeFile(t, q, "spool.conf", `{"approval": {"replay_over": 2, "discard_over": 0}}`)
	tokens := tokenFile(t, dir, "tokens", "# the console's identities\n"+
		tokenLine("vic", "viewer", "vic-token")+tokenLine("olga", "operator", "olga-token")+
		tokenLine("ada", "approver", "ada-token")+tokenLine("abe", "approver", "abe-token"))
	p, base := startListening(t, "serve", q, "--listen", "127.0.0.1:0", "--auth", tokens, "--metrics-refresh", "200ms")
	return q, base, p
}

// TestConsoleBrowser drives the console in headless Chromium: an operator
// signs in, filters the dead letters to one reason, asks for a replay of
// all that match (a dry-run count first); an approver signs in in a
// second browser context and approves; the files are back in inbox/ and
// the audit page shows the rows. A dead letter named and made of HTML
// shows as text. Each page is saved as a screenshot.
func TestConsoleBrowser(t *testing.T) {
	t.Parallel()
	alloc := browser(t)
	out := t.ArtifactDir()
	q, base := consoleQueue(t, 5, 3)

	op := consoleSession(t, alloc, base, "olga-token")
	shot(t, op, out, "1-overview")
	if got := text(t, op, "#stage-error"); !strings.Contains(got, "9") {
		t.Errorf("overview's error/ card: %q, want 9 messages", got)
	}

	do(t, op, "filter", chromedp.Click("#nav-dead-letters"), chromedp.WaitVisible("#filter-reason"),
		chromedp.SendKeys("#filter-reason", "missing-field"), chromedp.Click("#filter-apply"))
	waitTrue(t, op, "the filtered page", `location.hash.includes("reason=missing-field") && document.querySelectorAll("tr.dead-letter").length === 5`)
	shot(t, op, out, "2-dead-letters-filtered")

	// Hostile input: the name and the body are text, nothing ran.
	do(t, op, "all dead letters", chromedp.Navigate(base+"/#/dead-letters"))
	waitTrue(t, op, "every dead letter", `document.querySelectorAll("tr.dead-letter").length === 9`)
	if n := eval[int](t, op, `document.querySelectorAll("#dead-letter-rows img").length`); n != 0 {
		t.Errorf("the name <img src=x onerror=...>.json made %d <img> elements", n)
	}
	do(t, op, "the hostile message", chromedp.Click(`//a[contains(text(), "onerror")]`), chromedp.WaitVisible("#body"))
	waitTrue(t, op, "the body", `document.getElementById("body").textContent.includes("<script>")`)
	if got := text(t, op, "#body"); !strings.Contains(got, `<script>document.title="pwned"`) {
		t.Errorf("body shown as %q, want the <script> as text", got)
	}
	if eval[bool](t, op, `window.pwned === 1 || document.title === "pwned" || document.querySelectorAll("#body script").length > 0`) {
		t.Error("the dead letter's <script> ran or became an element")
	}
	shot(t, op, out, "3-message-script-as-text")

	do(t, op, "groups", chromedp.Click("#nav-groups"), chromedp.WaitVisible("tr.group"))
	shot(t, op, out, "4-groups")

	consoleReplayApprove(t, alloc, op, q, base, out)
}

// TestConsoleBrowserBatchFile: on a queue of batch files announced by
// done-files, a data file whose done-file has not come shows on the
// inbox/ card as waiting, not as a message, and a file its include does
// not take as never taken; once its done-file comes it is a message, and
// the waiting line goes. Consumed, the file's row on the
// overview leads to its page, which names its dead letter.
func TestConsoleBrowserBatchFile(t *testing.T) {
	t.Parallel()
	alloc := browser(t)
	dir := t.TempDir()
	q := filepath.Join(dir, "q")
	mustRun(t, 0, "init", q, "--format", "csv", "--done-file", "{name}.done")
	putBytes(t, q, "orders.csv", []byte("msg_id,order_no,seq,amount\nA,O1,1,1.00\nB,O1,x,1.00\n"))
	putBytes(t, q, "orders.csv.gz", nil) // not a name its include takes
	tokens := tokenFile(t, dir, "tokens", tokenLine("vic", "viewer", "vic-token"))
	_, base := startListening(t, "serve", q, "--listen", "127.0.0.1:0", "--auth", tokens, "--metrics-refresh", "200ms")
	vic := consoleSession(t, alloc, base, "vic-token")
	waitTrue(t, vic, "the waiting line", `document.getElementById("stage-inbox-waiting") !== null`)
	if got := text(t, vic, "#stage-inbox-waiting"); !strings.HasPrefix(got, "1 data file waiting for a done-file, the oldest ") {
		t.Errorf("inbox/ card's waiting line: %q", got)
	}
	if got := text(t, vic, "#stage-inbox .n"); got != "0" {
		t.Errorf("inbox/ card counts %q messages, want 0: a file waiting for its done-file is none yet", got)
	}
	if got := text(t, vic, "#stage-inbox-not-taken"); got != "1 other entry never taken (not a message name; spool status names them)" {
		t.Errorf("inbox/ card's line of entries not taken: %q", got)
	}
	shot(t, vic, t.ArtifactDir(), "done-file-waiting")
	putBytes(t, q, "orders.csv.done", nil)
	// The overview page draws itself again every 5 s.
	do(t, vic, "the overview page", chromedp.Click("#nav-overview"))
	waitTrue(t, vic, "the file counted as a message", `(() => { const c = document.querySelector("#stage-inbox .n");
		return c !== null && c.textContent === "1" && document.getElementById("stage-inbox-waiting") === null })()`)

	if st := parseStats(t, mustRun(t, 0, "consume", q)); st != (consumeStats{Processed: 1, DeadLetters: 1}) {
		t.Fatalf("consume: %+v, want 1 processed and row B dead-lettered", st)
	}
	// Away and back: the overview draws itself anew on a visit.
	do(t, vic, "the file's page", chromedp.Click("#nav-dead-letters"), chromedp.WaitVisible("#filter-reason"),
		chromedp.Click("#nav-overview"), chromedp.WaitVisible("#batch-files"),
		chromedp.Click(`//div[@id="batch-files"]//a[text()="orders.csv"]`), chromedp.WaitVisible("tr.batch-file"))
	if got := text(t, vic, "tr.batch-file"); !strings.Contains(got, "orders~L3.csv") {
		t.Errorf("orders.csv's page, its batch-file row: %q, want its dead letter orders~L3.csv", got)
	}
	shot(t, vic, t.ArtifactDir(), "batch-file")
	do(t, vic, "its dead letter's page", chromedp.Click(`//tr[@class="batch-file"]//a[text()="orders~L3.csv"]`),
		chromedp.WaitVisible("#places"))
	waitTrue(t, vic, "the dead letter's page", `document.getElementById("places").textContent.includes("error/orders~L3.csv")`)
}

// tokenLine is a token file's line for name with role and token.
func tokenLine(name, role, token string) string {
	return fmt.Sprintf("%s %s %s\n", name, role, sha256Hex(token))
}

// tokenFile writes a token file of text into dir, readable by its owner
// alone, as serve --auth requires.
func tokenFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// consoleReplayApprove is the four-eyes replay in the browser: op, an
// operator on the dead letters page, asks for a replay of every
// missing-field dead letter; ada, an approver in another browser context,
// approves it on its task page; the five files are back in inbox/ and
// the audit page shows the request and the approval.
func consoleReplayApprove(t *testing.T, alloc, op context.Context, q, base, out string) {
	do(t, op, "filter", chromedp.Navigate(base+"/#/dead-letters?reason=missing-field"))
	waitTrue(t, op, "the filtered page", `document.querySelectorAll("tr.dead-letter").length === 5`)
	do(t, op, "dry run", chromedp.SendKeys("#note", "fixed the producer"), chromedp.Click("#replay-all"), chromedp.WaitVisible("#dry-run-count"))
	if got := text(t, op, "#dry-run-count"); got != "5 dead letters match" {
		t.Errorf("dry-run count: %q, want 5 dead letters match", got)
	}
	shot(t, op, out, "5-replay-dry-run")
	do(t, op, "ask", chromedp.Click("#confirm-replay"), chromedp.WaitVisible("#task-created"))
	got := text(t, op, "#task-created")
	if !strings.Contains(got, "(5 files)") {
		t.Errorf("task created: %q, want its 5 files", got)
	}
	if n := countFiles(t, q, inbox); n != 0 {
		t.Fatalf("%d files in inbox/ before the approval, want 0", n)
	}
	do(t, op, "tasks", chromedp.Click("#nav-tasks"), chromedp.WaitVisible("tr.task"))
	if n := eval[int](t, op, `document.querySelectorAll("a.approve-link, #approve").length`); n != 0 {
		t.Errorf("the operator is offered %d approve buttons, want none", n)
	}
	shot(t, op, out, "6-tasks-waiting")

	ada := consoleSession(t, alloc, base, "ada-token")
	do(t, ada, "tasks", chromedp.Click("#nav-tasks"), chromedp.WaitVisible("a.approve-link"))
	shot(t, ada, out, "7-tasks-approver")
	do(t, ada, "review", chromedp.Click("a.approve-link"), chromedp.WaitVisible("#approve"))
	do(t, ada, "approve", chromedp.Click("#approve"), chromedp.WaitVisible("#approve-confirm-yes"), chromedp.Click("#approve-confirm-yes"))
	waitFor(t, cmdTimeout, "the 5 files back in inbox/", func() bool { return countFiles(t, q, inbox) == 5 })
	waitTrue(t, ada, "the task done", `document.getElementById("task-state").textContent === "done"`)
	shot(t, ada, out, "8-task-done")

	do(t, ada, "audit", chromedp.Click("#nav-audit"), chromedp.WaitVisible("tr.audit-row"))
	waitTrue(t, ada, "the audit rows", `(() => { const rows = [...document.querySelectorAll("tr.audit-row")].map(r => r.textContent);
		return rows.some(r => r.includes("olga") && r.includes("replay")) && rows.some(r => r.includes("ada") && r.includes("approve")); })()`)
	shot(t, ada, out, "9-audit")
}

// countFiles counts the message files in stage of q.
func countFiles(t *testing.T, q, stage string) int {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(q, stage))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		if strings.HasSuffix(e.Name(), ".json") && !strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	return n
}

//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeFollowsReplacedInbox: spool serve counts the inbox/ its path
// names now. inbox/ renamed away and a new one made with files, then
// removed and made anew with other files: within seconds /metrics
// shows each new backlog (it showed the old, empty directory forever),
// and /readyz answers 200 again.
func TestServeFollowsReplacedInbox(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	putMessage(t, q, "first.json", metricsMessage("first", "1.00"))
	mustRun(t, 0, "consume", q)
	p, base := startListening(t, "serve", q, "--listen", "127.0.0.1:0", "--metrics-refresh", "100ms")
	inboxDir := filepath.Join(q, inbox)
	inboxIs := func(n int) func() bool {
		return func() bool {
			v, ok := scrapeMetrics(t, base).value("spool_queue_messages", "stage", "inbox")
			return ok && v == float64(n)
		}
	}
	waitFor(t, cmdTimeout, "serve's first listing", inboxIs(0))

	replace := func(how string, n int) {
		t.Helper()
		switch how {
		case "renamed":
			if err := os.Rename(inboxDir, inboxDir+".old"); err != nil {
				t.Fatal(err)
			}
		case "removed":
			if err := os.RemoveAll(inboxDir); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Mkdir(inboxDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			putMessage(t, q, fmt.Sprintf("%s-%d.json", how, i), metricsMessage(fmt.Sprintf("%s-%d", how, i), "1.00"))
		}
		// A stage is listed again after --metrics-refresh, or 100 times
		// its last listing's time if longer, which a loaded machine
		// stretches to seconds: 15 s, not cmdTimeout, still catches a
		// serve that never sees the new inbox/.
		waitFor(t, 15*time.Second, fmt.Sprintf("/metrics to show the %d messages of the new inbox/ (%s and made anew)", n, how), inboxIs(n))
		if code, body := get(t, base, "/readyz"); code != 200 {
			t.Errorf("/readyz after inbox/ was %s and made anew: %d %q", how, code, body)
		}
	}
	replace("renamed", 3)
	replace("removed", 2)

	// Gone and not yet back: not ready, saying so.
	if err := os.Rename(inboxDir, inboxDir+".gone"); err != nil {
		t.Fatal(err)
	}
	if body := waitStatus(t, base, "/readyz", 503); !strings.Contains(body, "inbox") {
		t.Errorf("/readyz with inbox/ gone: %q, want the stage named", body)
	}
	if err := os.Rename(inboxDir+".gone", inboxDir); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, base, "/readyz", 200)

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.code != 0 {
		t.Fatalf("serve after SIGTERM: want exit 0\n%s", r)
	}
	if !strings.Contains(r.stderr, "a stage of the queue was replaced") {
		t.Errorf("serve did not log that it followed a replaced stage:\n%s", r.stderr)
	}
}

//go:build linux

package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// TestOutOfFileDescriptors: a consumer run under a tight open-file limit
// (prlimit --nofile, from where it can barely start to where it runs
// out in the middle of a batch) either finishes or stops within seconds,
// exit 3, with one line saying it ran out of file descriptors. It never
// sits retrying, and never dead-letters a message for it: at ulimit -n
// 24 a consumer with --exec retried every message with growing pauses
// (a minute without progress, "calls paused" its only word) until their
// retries ran out, and the claims it could not open were dead letters
// "unreadable". Once the limit is lifted, everything is processed.
func TestOutOfFileDescriptors(t *testing.T) {
	t.Parallel()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit is not installed (util-linux)")
	}
	limited := spoolAt{bin: prlimit}
	for _, mode := range [][]string{
		// The calls the stop cut short count an attempt, and wait for
		// their retry: --retry-wait has the run after wait for them.
		{"--exec", "cat >/dev/null", "--concurrency", "16", "--retry-wait", "1m"},
		{"--workers", "16"},
	} {
		t.Run(mode[0], func(t *testing.T) {
			t.Parallel()
			for limit := 18; limit <= testenv.Pick(30, 24); limit++ {
				q, _ := workQueue(t)
				const n = 100
				for i := range n {
					putMessage(t, q, fmt.Sprintf("m%03d.json", i), orderMessage(fmt.Sprintf("m%03d", i), "O", i+1, "1.00"))
				}
				began := time.Now()
				args := append([]string{fmt.Sprintf("--nofile=%d:%d", limit, limit), spoolBin, "consume", q}, mode...)
				r := limited.runWithin(t, 30*time.Second, args...)
				took := time.Since(began)
				lines := notLogged(r.stderr)
				switch {
				case r.code == 0:
				case r.code == 3 && len(lines) == 1 && strings.Contains(lines[0], "too many open files"):
				default:
					t.Errorf("ulimit -n %d: want exit 0, or exit 3 with one line of too many open files\n%s", limit, r)
				}
				if took > 10*time.Second {
					t.Errorf("ulimit -n %d: the run took %v: it sat instead of stopping", limit, took)
				}
				if got := countNames(t, q, errorStage); got != 0 {
					t.Errorf("ulimit -n %d: %d messages dead-lettered for the consumer's own lack of file descriptors\n%s", limit, got, r)
				}
				st := parseStats(t, mustRun(t, 0, append([]string{"consume", q}, mode...)...))
				if got := countNames(t, q, done); got != n || st.DeadLetters != 0 {
					t.Errorf("ulimit -n %d: after a run without the limit done/ holds %d of %d (stats %+v)", limit, got, n, st)
				}
			}
		})
	}
}

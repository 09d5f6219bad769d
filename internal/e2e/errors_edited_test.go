//go:build linux

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestErrorsEditedDeadLetter: dead letters fixed in error/ with sed -i (a
// new file renamed over the old one: a new inode, maybe one an earlier
// edit freed) are still the dead letters recorded under their names:
// spool errors lists each with its reason, not "unknown", as the console
// does, spool replay --reason selects them, and once they are consumed
// fsck finds nothing wrong.
func TestErrorsEditedDeadLetter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	q := filepath.Join(dir, "q")
	mustRun(t, 0, "init", q)
	const n = 4
	for i := 1; i <= n; i++ {
		putMessage(t, q, fmt.Sprintf("e%d.json", i), fmt.Sprintf(`{"msg_id":"e%d","order_no":"o","seq":%d}`, i, i))
	}
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st != (consumeStats{DeadLetters: n}) {
		t.Fatalf("%+v, want %d dead letters (amount missing)", st, n)
	}
	for i := 1; i <= n; i++ {
		sedInPlace(t, `s/"seq":/"amount":"1.00","seq":/`, filepath.Join(q, errorStage, fmt.Sprintf("e%d.json", i)))
	}
	csv := mustRun(t, 0, "errors", q).stdout
	for i := 1; i <= n; i++ {
		if want := fmt.Sprintf("e%d.json,missing-field\n", i); !strings.Contains(csv, want) {
			t.Errorf("spool errors after the edits: no line %q\n%s", want, csv)
		}
	}
	if strings.Contains(csv, "unknown") {
		t.Errorf("spool errors calls an edited dead letter unknown:\n%s", csv)
	}
	tokens := tokenFile(t, dir, "tokens", tokenLine("vic", "viewer", "vic-token"))
	_, base := startListening(t, "serve", q, "--listen", "127.0.0.1:0", "--auth", tokens)
	requireSameListing(t, "edited in error/", q, base, "vic-token")
	r := mustRun(t, 0, "replay", q, "--reason", "missing-field")
	if got := strings.Count(r.stdout, "replayed "); got != n {
		t.Fatalf("replay --reason missing-field replayed %d files, want the %d edited ones\n%s", got, n, r)
	}
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st != (consumeStats{Processed: n}) {
		t.Fatalf("the fixed files: %+v, want %d processed", st, n)
	}
	if r := run(t, "fsck", q); r.code != 0 {
		t.Fatalf("fsck after replaying edited dead letters:\n%s", r)
	}
}

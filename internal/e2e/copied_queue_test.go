//go:build linux

package e2e

import (
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeCopySteps are the commands the README gives to make a copied
// queue a queue of its own, COPY standing for the copy's path.
func readmeCopySteps(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		if strings.Contains(m[1], "spool fsck COPY --repair") {
			return strings.Split(strings.TrimSpace(m[1]), "\n")
		}
	}
	t.Fatal("README.md has no sh block with the steps for a copied queue (spool fsck COPY --repair)")
	return nil
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// TestCopiedQueueREADME: a consumed queue copied with cp -a and with
// cp -r, the README's steps run literally on the copy: the copy is a
// queue of its own (another identity, its consume works, a redelivery of
// a message it holds in done/ is a duplicate, fsck finds nothing), and
// the original's ledger is untouched. Removing queue.id alone, the old
// advice, is refused.
func TestCopiedQueueREADME(t *testing.T) {
	t.Parallel()
	steps := readmeCopySteps(t)
	base := t.TempDir()
	q := filepath.Join(base, "q")
	mustRun(t, 0, "init", q)
	for _, id := range []string{"a", "b", "c"} {
		putMessage(t, q, id+".json", metricsMessage(id, "1.00"))
	}
	putMessage(t, q, "bad.json", "nope")
	mustRun(t, 0, "consume", q)
	putMessage(t, q, "waiting.json", metricsMessage("w", "1.00"))
	ledger := filepath.Join(q, "ledger.db")
	before := fileSum(t, ledger)
	origID, err := os.ReadFile(filepath.Join(q, "queue.id"))
	if err != nil {
		t.Fatal(err)
	}

	for _, how := range []string{"-a", "-r"} {
		t.Run("cp"+how, func(t *testing.T) {
			cp := filepath.Join(base, "copy"+how)
			if out, err := exec.Command("cp", how, q, cp).CombinedOutput(); err != nil {
				t.Fatalf("cp %s: %v\n%s", how, err, out)
			}
			if _, err := os.Stat(filepath.Join(cp, "ledger.db")); err != nil {
				t.Fatalf("cp %s did not carry the ledger, which the README says it does: %v", how, err)
			}
			if how == "-a" {
				// The old advice: queue.id alone.
				old := filepath.Join(base, "old-advice")
				if out, err := exec.Command("cp", "-a", q, old).CombinedOutput(); err != nil {
					t.Fatalf("cp -a: %v\n%s", err, out)
				}
				if err := os.Remove(filepath.Join(old, "queue.id")); err != nil {
					t.Fatal(err)
				}
				if r := run(t, "consume", old); r.code != 2 || !strings.Contains(r.stderr, "no queue.id") {
					t.Errorf("a copy with queue.id alone removed: want exit 2 naming the missing queue.id\n%s", r)
				}
			}
			for _, step := range steps {
				cmd := exec.Command("/bin/sh", "-c", strings.ReplaceAll(step, "COPY", cp))
				cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(spoolBin)+":"+os.Getenv("PATH"))
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("README step %q: %v\n%s", step, err, out)
				}
			}
			newID, err := os.ReadFile(filepath.Join(cp, "queue.id"))
			if err != nil {
				t.Fatalf("after the README's steps the copy has no queue.id: %v", err)
			}
			if string(newID) == string(origID) {
				t.Fatalf("the copy kept the original's identity %s", origID)
			}
			putMessage(t, cp, "a-again.json", metricsMessage("a", "1.00"))
			r := mustRun(t, 0, "consume", cp)
			if st := parseStats(t, r); st.Processed != 1 || st.Duplicates != 1 {
				t.Errorf("consume of the copy: %+v, want the waiting message processed and the redelivery of a a duplicate\n%s", st, r)
			}
			if r := run(t, "fsck", cp); r.code != 0 {
				t.Errorf("fsck of the new queue: want exit 0\n%s", r)
			}
		})
	}
	if fileSum(t, ledger) != before {
		t.Errorf("the original's ledger changed")
	}
	if r := run(t, "fsck", q); r.code != 0 {
		t.Errorf("fsck of the original: want exit 0\n%s", r)
	}
}

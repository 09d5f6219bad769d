//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The dead letters the console lists are the files of error/, however a
// file left it, and fsck names a dead letter whose file is gone.

// consoleDeadLetters is the console's listing of the dead letters, as the
// API serves it to a viewer: every page's files with their msg_id ("" for
// none), and the groups' counts by reason.
func consoleDeadLetters(t *testing.T, base, token string) (files map[string]string, byReason map[string]int) {
	t.Helper()
	files = map[string]string{}
	for cursor := ""; ; {
		code, body := apiCall(t, base, token, "GET", "/api/v1/dead-letters?limit=2"+cursor, "")
		if code != 200 {
			t.Fatalf("GET dead-letters: %d %s", code, body)
		}
		var page struct {
			Items []struct {
				File  string  `json:"file"`
				MsgID *string `json:"msg_id"`
			} `json:"items"`
			Next *string `json:"next"`
		}
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			if _, twice := files[it.File]; twice {
				t.Errorf("the console lists %s twice", it.File)
			}
			files[it.File] = ""
			if it.MsgID != nil {
				files[it.File] = *it.MsgID
			}
		}
		if page.Next == nil {
			break
		}
		cursor = "&cursor=" + *page.Next
	}
	code, body := apiCall(t, base, token, "GET", "/api/v1/dead-letters/groups", "")
	if code != 200 {
		t.Fatalf("GET dead-letters/groups: %d %s", code, body)
	}
	var g struct {
		Groups []struct {
			Reason string `json:"reason"`
			Count  int    `json:"count"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(body), &g); err != nil {
		t.Fatal(err)
	}
	byReason = map[string]int{}
	for _, gr := range g.Groups {
		byReason[gr.Reason] += gr.Count
	}
	return files, byReason
}

// errorsListing is spool errors: the files of error/ by name, with their
// reasons, and the counts by reason.
func errorsListing(t *testing.T, q string) (files []string, byReason map[string]int) {
	t.Helper()
	var rows []struct {
		File   string `json:"file"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, "errors", q, "--json").stdout), &rows); err != nil {
		t.Fatal(err)
	}
	byReason = map[string]int{}
	for _, r := range rows {
		files = append(files, r.File)
		byReason[r.Reason]++
	}
	return files, byReason
}

// sedInPlace edits a file as an operator fixing a dead letter does: sed
// -i writes a new file and renames it over the old, a new inode.
func sedInPlace(t *testing.T, script, path string) {
	t.Helper()
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sed", "-i", script, path).CombinedOutput(); err != nil {
		t.Fatalf("sed -i %s: %v\n%s", path, err, out)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(before, after) {
		t.Fatalf("sed -i kept the inode of %s: the test needs a new one", path)
	}
}

// requireSameListing checks that the console lists exactly the files
// spool errors lists, and that its groups count the same by reason.
func requireSameListing(t *testing.T, what, q, base, token string) map[string]string {
	t.Helper()
	listed, groups := consoleDeadLetters(t, base, token)
	files, counts := errorsListing(t, q)
	got := slices.Sorted(func(yield func(string) bool) {
		for f := range listed {
			if !yield(f) {
				return
			}
		}
	})
	slices.Sort(files)
	if !slices.Equal(got, files) {
		t.Errorf("%s: the console lists %q, spool errors %q", what, got, files)
	}
	if fmt.Sprint(groups) != fmt.Sprint(counts) {
		t.Errorf("%s: the console's groups count %v, spool errors %v", what, groups, counts)
	}
	return listed
}

// TestDeadLetterIndexForgets: a dead letter fixed with sed -i (a new
// inode) and replayed, one removed by hand, and one edited and discarded
// leave the console's listing and groups, which match spool errors after
// each; fsck names the one removed by hand (dead-letter-missing, exit 1)
// and nothing else, --repair retires it, and the console still matches.
func TestDeadLetterIndexForgets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	q := filepath.Join(dir, "q")
	mustRun(t, 0, "init", q)
	for _, id := range []string{"a", "b", "c", "d"} {
		putMessage(t, q, id+".json", `{"msg_id":"`+id+`1","seq":1,"amount":"1.00"}`) // no order_no
	}
	putMessage(t, q, "junk.json", "not json")
	requireStats(t, "dead letters", mustRun(t, 0, "consume", q), consumeStats{DeadLetters: 5})
	tokens := tokenFile(t, dir, "tokens", tokenLine("vic", "viewer", "vic-token"))
	_, base := startListening(t, "serve", q, "--listen", "127.0.0.1:0", "--auth", tokens)
	const vic = "vic-token"
	listed := requireSameListing(t, "after consume", q, base, vic)
	if listed["b.json"] != "b1" || listed["junk.json"] != "" {
		t.Errorf("the console's msg_id: %v, want b1 for b.json (missing order_no, valid msg_id) and none for junk.json", listed)
	}

	// Fixed in place and replayed: processed, gone from error/.
	sedInPlace(t, `s/"seq":1/"order_no":"o","seq":1/`, filepath.Join(q, errorStage, "a.json"))
	mustRun(t, 0, "replay", q, "a.json")
	requireStats(t, "the fixed one", mustRun(t, 0, "consume", q), consumeStats{Processed: 1})
	requireSameListing(t, "after sed -i and replay", q, base, vic)

	// Edited, then discarded.
	sedInPlace(t, `s/"seq":1/"seq":2/`, filepath.Join(q, errorStage, "d.json"))
	mustRun(t, 0, "discard", q, "d.json", "--note", "edited, then given up")
	requireSameListing(t, "after sed -i and discard", q, base, vic)
	requireFindings(t, "fsck after the edits", fsck(t, 0, q), map[string]int{"discarded": 1})

	// Removed by hand: the console stops listing it at once, fsck names it.
	if err := os.Remove(filepath.Join(q, errorStage, "c.json")); err != nil {
		t.Fatal(err)
	}
	requireSameListing(t, "after rm", q, base, vic)
	rep := fsck(t, 1, q)
	requireFindings(t, "fsck after rm", rep, map[string]int{"dead-letter-missing": 1, "discarded": 1})
	for _, f := range rep.Findings {
		if f.Kind == "dead-letter-missing" && (len(f.Examples) != 1 || !strings.HasPrefix(f.Examples[0], "c.json")) {
			t.Errorf("dead-letter-missing names %q, want c.json", f.Examples)
		}
	}
	r := mustRun(t, 0, "fsck", q, "--repair")
	if !strings.Contains(r.stdout, "repaired dead letter c.json") {
		t.Errorf("fsck --repair does not say what it repaired:\n%s", r)
	}
	requireFindings(t, "fsck after --repair", fsck(t, 0, q), map[string]int{"discarded": 1})
	requireSameListing(t, "after --repair", q, base, vic)
	// The record stays, as history.
	if s := mustRun(t, 0, "show", q, "c1").stdout; !strings.Contains(s, "dead letter") {
		t.Errorf("show c1 after the repair:\n%s", s)
	}
}

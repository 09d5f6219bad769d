//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPendingDeadLetterNotMoved: a record's dead letter that a killed run
// wrote and did not record (its batch file still in inbox/) is neither a
// replay's nor a discard's: replayed, the run that resumes the file wrote
// the record's dead letter again, and the bad record had two. By name it
// is refused (exit 1, the line says why); by --all it is left out and
// said so, the other dead letters going as asked; the resumed run then
// records it, one file for one bad record, and it replays by name.
// errors and the API's dry run say what it is meanwhile.
func TestPendingDeadLetterNotMoved(t *testing.T) {
	t.Parallel()
	header := "msg_id,order_no,seq,amount\n"
	q := batchQueue(t, `{"format": "csv"}`)
	mustRun(t, 0, "consume", q) // makes the ledger's tables
	putBytes(t, q, "orders.csv", []byte(header+"a1,o,1,1.00\na2,o,2,2.00\na3,o,3\na4,o,4,4.00\n"))
	// The killed run's dead letter of a3 (line 4), written, not recorded;
	// and a file of error/ of no batch file, which goes as asked.
	for name, body := range map[string]string{"orders~L4.csv": header + "a3,o,3\n", "stray.csv": "x\n"} {
		if err := os.WriteFile(filepath.Join(q, errorStage, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const why = "orders~L4.csv: not recorded yet: a dead letter of inbox/orders.csv"

	if r := mustRun(t, 1, "replay", q, "orders~L4.csv"); !strings.Contains(r.stderr, why) {
		t.Errorf("replay of the pending dead letter by name:\n%s", r)
	}
	if r := mustRun(t, 1, "discard", q, "orders~L4.csv", "--note", "n"); !strings.Contains(r.stderr, why) {
		t.Errorf("discard of the pending dead letter by name:\n%s", r)
	}
	if r := mustRun(t, 0, "replay", q, "--all", "--dry-run"); !strings.Contains(r.stdout, "skip "+why) || !strings.Contains(r.stdout, "would replay stray.csv") {
		t.Errorf("replay --all --dry-run:\n%s", r)
	}
	// The API's dry run counts it apart.
	tokens := tokenFile(t, t.TempDir(), "tokens", tokenLine("olga", "operator", "olga-token"))
	_, base := startListening(t, "serve", q, "--listen", "127.0.0.1:0", "--auth", tokens)
	code, body := apiCall(t, base, "olga-token", "POST", "/api/v1/replays", `{"all": true, "dry_run": true}`)
	var dry struct{ Count, Skipped, Pending int }
	if err := json.Unmarshal([]byte(body), &dry); code != 200 || err != nil || dry.Count != 1 || dry.Pending != 1 {
		t.Errorf("the API's dry run of --all: %d %s (%v), want count 1, pending 1", code, body, err)
	}
	if r := mustRun(t, 0, "discard", q, "--all", "--note", "n"); !strings.Contains(r.stdout, "skip "+why) || !strings.Contains(r.stdout, "discarded stray.csv") {
		t.Errorf("discard --all:\n%s", r)
	}
	if got := stageNames(t, q, errorStage); !slices.Equal(got, []string{"orders~L4.csv"}) {
		t.Fatalf("error/ holds %q after discard --all, want the pending dead letter alone", got)
	}
	if r := mustRun(t, 0, "errors", q, "--detail"); !strings.Contains(r.stdout, "orders~L4.csv,unknown,,\"not recorded yet: a dead letter of inbox/orders.csv, which the run that consumes it records\"") {
		t.Errorf("errors --detail does not say the dead letter is pending:\n%s", r)
	}
	if r := mustRun(t, 0, "replay", q, "--all"); !strings.Contains(r.stderr, "not recorded yet: nothing to replay") {
		t.Errorf("replay --all of nothing but the pending dead letter:\n%s", r)
	}

	st := parseStats(t, mustRun(t, 0, "consume", q))
	if st.Processed != 3 || st.DeadLetters != 1 {
		t.Fatalf("the resumed file: %+v, want 3 processed and 1 dead letter", st)
	}
	if got := stageNames(t, q, errorStage); !slices.Equal(got, []string{"orders~L4.csv"}) {
		t.Fatalf("error/ holds %q, want the bad record's one dead letter", got)
	}
	checkFsck(t, q)
	mustRun(t, 0, "replay", q, "orders~L4.csv")
}

//go:build linux

package e2e

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// setAge makes a message of inbox/ look written age ago: ages are taken
// from modification times.
func setAge(t *testing.T, q, name string, age time.Duration) {
	t.Helper()
	at := time.Now().Add(-age)
	if err := os.Chtimes(filepath.Join(q, inbox, name), at, at); err != nil {
		t.Fatal(err)
	}
}

// decodeStrict decodes one JSON object into v, refusing unknown fields
// and trailing data, so that a renamed field fails the test.
func decodeStrict(t *testing.T, what, text string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, text)
	}
	if dec.More() {
		t.Fatalf("%s: more than one JSON value\n%s", what, text)
	}
}

// jsonKeys returns the top-level keys of a JSON object.
func jsonKeys(t *testing.T, text string) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return slices.Sorted(maps.Keys(m))
}

// TestLagMaxAgeAndJSON: --max-age exits 1 when the oldest message in
// inbox/ (by modification time, not by name) is older, --json says the
// same in one object with the exit status of the line, and the line itself
// is unchanged by either flag.
func TestLagMaxAgeAndJSON(t *testing.T) {
	t.Parallel()
	q, _ := workQueue(t)

	// An empty inbox has no age: never too old, null in JSON.
	mustRun(t, 0, "lag", q, "0", "--max-age", "0s")
	type lagJSON struct {
		Inbox            int      `json:"inbox"`
		Processing       int      `json:"processing"`
		Error            int      `json:"error"`
		OldestAgeSeconds *float64 `json:"oldest_age_seconds"`
		Threshold        uint64   `json:"threshold"`
		MaxAgeSeconds    *float64 `json:"max_age_seconds"`
		Over             bool     `json:"over"`
		Held             int      `json:"held"`
		Paused           *bool    `json:"paused"`
	}
	r := mustRun(t, 0, "lag", q, "5", "--json")
	if want := []string{"error", "held", "inbox", "max_age_seconds", "oldest_age_seconds", "over", "paused", "processing", "threshold"}; !slices.Equal(jsonKeys(t, r.stdout), want) {
		t.Errorf("lag --json keys %q, want %q", jsonKeys(t, r.stdout), want)
	}
	var got lagJSON
	decodeStrict(t, "lag --json", r.stdout, &got)
	if got.Paused == nil || *got.Paused {
		t.Errorf("lag --json paused = %v, want false", got.Paused)
	}
	got.Paused = nil
	if got != (lagJSON{Threshold: 5}) {
		t.Errorf("lag --json on an empty queue: %+v", got)
	}

	// a.json sorts first but is the newest; z.json is the oldest.
	putMessage(t, q, "a.json", `{"msg_id":"a"}`)
	putMessage(t, q, "z.json", `{"msg_id":"z"}`)
	putMessage(t, q, "notes.txt", "not a message, never counted nor aged")
	setAge(t, q, "a.json", time.Minute)
	setAge(t, q, "z.json", 2*time.Hour)
	setAge(t, q, "notes.txt", 100*time.Hour)
	writeFile(t, filepath.Join(q, errorStage), "dead.json", "{")

	const line = "inbox=2 processing=0 error=1\n"
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"5"}, 0},
		{[]string{"1"}, 1},
		{[]string{"5", "--max-age", "3h"}, 0},
		{[]string{"5", "--max-age", "90m"}, 1}, // z.json is 2h old
		{[]string{"--max-age=1h", "5"}, 1},
		{[]string{"1", "--max-age", "3h"}, 1},
	} {
		r := mustRun(t, c.code, append([]string{"lag", q}, c.args...)...)
		if r.stdout != line || r.stderr != "" {
			t.Errorf("lag %q: stdout %q stderr %q, want %q and nothing on stderr", c.args, r.stdout, r.stderr, line)
		}
	}

	r = mustRun(t, 1, "lag", q, "5", "--max-age", "90m", "--json")
	got = lagJSON{}
	decodeStrict(t, "lag --json", r.stdout, &got)
	if got.Inbox != 2 || got.Processing != 0 || got.Error != 1 || got.Threshold != 5 || !got.Over {
		t.Errorf("lag --json: %+v, want inbox 2, error 1, threshold 5, over", got)
	}
	if got.OldestAgeSeconds == nil || *got.OldestAgeSeconds < 7200 || *got.OldestAgeSeconds > 7200+60 {
		t.Errorf("oldest_age_seconds %v, want about 7200 (z.json, by modification time)", got.OldestAgeSeconds)
	}
	if got.MaxAgeSeconds == nil || *got.MaxAgeSeconds != 5400 {
		t.Errorf("max_age_seconds %v, want 5400", got.MaxAgeSeconds)
	}
	r = mustRun(t, 0, "lag", q, "5", "--json")
	got = lagJSON{}
	decodeStrict(t, "lag --json", r.stdout, &got)
	if got.Over || got.MaxAgeSeconds != nil || got.OldestAgeSeconds == nil {
		t.Errorf("lag --json without --max-age: %+v, want not over, max_age_seconds null, an age", got)
	}
	r = mustRun(t, 1, "lag", q, "1", "--json")
	got = lagJSON{}
	decodeStrict(t, "lag --json", r.stdout, &got)
	if !got.Over || r.stderr != "" {
		t.Errorf("lag 1 --json: %+v stderr %q, want over and nothing on stderr", got, r.stderr)
	}

	for _, bad := range [][]string{{"5", "--max-age", "-1s"}, {"5", "--max-age", "soon"}, {"5", "--max-age"}} {
		r := run(t, append([]string{"lag", q}, bad...)...)
		if r.code != 2 || len(lines(r.stderr)) != 1 || r.stdout != "" {
			t.Errorf("lag %q: want exit 2, one line on stderr, nothing on stdout\n%s", bad, r)
		}
	}
}

// TestStatusJSON: status --json is one object holding every field of the
// human report, with stable names, and its numbers match the queue.
func TestStatusJSON(t *testing.T) {
	t.Parallel()
	q, _ := workQueue(t)
	putMessage(t, q, "ok1.json", orderMessage("1", "O", 1, "1.50"))
	putMessage(t, q, "ok2.json", orderMessage("2", "O", 2, "2"))
	putMessage(t, q, "dup.json", orderMessage("1", "O", 1, "1.50"))
	putMessage(t, q, "bad.json", "{")
	putMessage(t, q, "nokey.json", `{"order_no":"O"}`)
	putMessage(t, q, "nokey2.json", `{"order_no":"P"}`)
	mustRun(t, 0, "consume", q)
	putMessage(t, q, "wait.json", orderMessage("3", "O", 3, "3"))
	setAge(t, q, "wait.json", 10*time.Minute)
	// A temp file of a killed producer: old and unlocked, so stale.
	writeFile(t, filepath.Join(q, inbox), ".spool-tmp-0123456789abcdef", "half")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(q, inbox, ".spool-tmp-0123456789abcdef"), old, old); err != nil {
		t.Fatal(err)
	}

	// A file that is no message, beside them: counted apart, and named.
	writeFile(t, filepath.Join(q, inbox), "notes.txt", "not a message")

	r := mustRun(t, 0, "status", q, "--json")
	type status struct {
		Queue              string          `json:"queue"`
		Now                time.Time       `json:"now"`
		Stages             map[string]int  `json:"stages"`
		OldestInboxMTime   *time.Time      `json:"oldest_inbox_mtime"`
		OldestAgeSeconds   *float64        `json:"oldest_age_seconds"`
		Waiting            int             `json:"waiting_for_done_file"`
		OldestWaiting      *time.Time      `json:"oldest_waiting_for_done_file_mtime"`
		Orphans            int             `json:"done_files_without_data"`
		NotTaken           int             `json:"inbox_not_taken"`
		NotTakenNames      []string        `json:"inbox_not_taken_names"`
		TempFiles          int             `json:"temp_files"`
		StaleTempFiles     int             `json:"stale_temp_files"`
		InterruptedReplays int             `json:"interrupted_replays"`
		Discarded          int             `json:"discarded"`
		Interrupted        int             `json:"interrupted_discards"`
		Outbox             json.RawMessage `json:"outbox"`
		RetriesWaiting     int             `json:"retries_waiting"`
		NextRetryAt        *time.Time      `json:"next_retry_at"`
		NextRetryInSeconds *float64        `json:"next_retry_in_seconds"`
		Paused             json.RawMessage `json:"paused"`
		Held               struct {
			Files  int `json:"files"`
			MsgIDs int `json:"msg_ids"`
		} `json:"held"`
		BatchFiles json.RawMessage `json:"batch_files"`
		Ledger     struct {
			Processed           int64            `json:"processed"`
			Duplicates          int64            `json:"duplicates"`
			DeadLetters         int64            `json:"dead_letters"`
			DeadLettersByReason map[string]int64 `json:"dead_letters_by_reason"`
		} `json:"ledger"`
	}
	var got status
	decodeStrict(t, "status --json", r.stdout, &got)
	if got.Waiting != 0 || got.OldestWaiting != nil || got.Orphans != 0 {
		t.Errorf("status --json of a queue of JSON messages: %d waiting for a done-file (oldest %v), and %d done-files without data, want 0, null and 0", got.Waiting, got.OldestWaiting, got.Orphans)
	}
	if got.NotTaken != 1 || !slices.Equal(got.NotTakenNames, []string{"notes.txt"}) {
		t.Errorf("status --json: inbox_not_taken %d %q, want notes.txt alone (not the temp file)", got.NotTaken, got.NotTakenNames)
	}
	if string(got.Paused) != "null" || got.Held.Files != 0 || got.Held.MsgIDs != 0 {
		t.Errorf("status --json paused %s, held %+v: want null, nothing held", got.Paused, got.Held)
	}
	if string(got.BatchFiles) != "[]" {
		t.Errorf("status --json batch_files %s on a queue of JSON files, want []", got.BatchFiles)
	}
	if got.Queue != q || time.Since(got.Now) > time.Minute || got.Now.Location() != time.UTC {
		t.Errorf("queue %q now %v, want %q and about now, in UTC", got.Queue, got.Now, q)
	}
	if want := map[string]int{"inbox": 1, "processing": 0, "done": 3, "error": 3}; !maps.Equal(got.Stages, want) {
		t.Errorf("stages %v, want %v", got.Stages, want)
	}
	if got.OldestAgeSeconds == nil || *got.OldestAgeSeconds < 600 || *got.OldestAgeSeconds > 660 || got.OldestInboxMTime == nil ||
		got.Now.Sub(*got.OldestInboxMTime).Seconds()-*got.OldestAgeSeconds > 0.01 {
		t.Errorf("oldest %v, age %v: want wait.json's modification time, 600 s ago", got.OldestInboxMTime, got.OldestAgeSeconds)
	}
	l := got.Ledger
	if l.Processed != 2 || l.Duplicates != 1 || l.DeadLetters != 3 ||
		!maps.Equal(l.DeadLettersByReason, map[string]int64{"parse": 1, "missing-field": 2}) {
		t.Errorf("ledger %+v, want 2 processed, 1 duplicate, 3 dead letters (parse 1, missing-field 2)", l)
	}
	if got.RetriesWaiting != 0 || got.NextRetryAt != nil || got.NextRetryInSeconds != nil {
		t.Errorf("retries %d next %v, want none", got.RetriesWaiting, got.NextRetryAt)
	}
	if got.Discarded != 0 || got.Interrupted != 0 {
		t.Errorf("discarded %d, interrupted discards %d, want none", got.Discarded, got.Interrupted)
	}
	if got.TempFiles != 1 || got.StaleTempFiles != 1 || got.InterruptedReplays != 0 {
		t.Errorf("temp files %d (stale %d), interrupted replays %d; want 1 (1), 0", got.TempFiles, got.StaleTempFiles, got.InterruptedReplays)
	}
	// The human report says the same.
	human := mustRun(t, 0, "status", q).stdout
	for _, w := range []string{"oldest waiting 10m", "2 processed, 1 duplicate, 3 dead letters", "missing-field  2", "1 (1 stale"} {
		if !strings.Contains(human, w) {
			t.Errorf("status does not say %q:\n%s", w, human)
		}
	}

	// An empty inbox: both oldest fields are null, the reasons {}.
	q2, _ := workQueue(t)
	r = mustRun(t, 0, "status", q2, "--json")
	for _, w := range []string{`"oldest_inbox_mtime": null`, `"oldest_age_seconds": null`, `"dead_letters_by_reason": {}`} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("status --json of an empty queue lacks %s:\n%s", w, r.stdout)
		}
	}
}

//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestRedeliveryAfterRestart is I7's other half: a message consumed by one
// run and delivered again later, under the same name with the same
// content, IS a duplicate, though its name and content are those of the
// processed delivery. Delivered several times at once (enqueue, init
// --from), the copies get "~N" names and are duplicates too.
func TestRedeliveryAfterRestart(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	src, q := filepath.Join(base, "src"), filepath.Join(base, "q")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	msg := filepath.Join(src, "m.json")
	if err := os.WriteFile(msg, []byte(`{"msg_id":"m-1","order_no":"o-1","seq":1,"amount":"9.99"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, 0, "init", q, "--from", src)
	r := mustRun(t, 0, "consume", q)
	if got, want := parseStats(t, r), (consumeStats{Processed: 1}); got != want {
		t.Fatalf("first consume: %+v, want %+v", got, want)
	}

	// The same name and content again, after the first was consumed.
	mustRun(t, 0, "enqueue", q, msg)
	if _, err := os.Lstat(filepath.Join(q, inbox, "m.json")); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	r = mustRun(t, 0, "consume", q)
	if got, want := parseStats(t, r), (consumeStats{Duplicates: 1}); got != want {
		t.Errorf("consume of the redelivery: %+v, want %+v", got, want)
	}

	// Three more at once, by enqueue and init --from: no copy may
	// overwrite another waiting in inbox/.
	mustRun(t, 0, "enqueue", q, msg, msg)
	mustRun(t, 0, "init", q, "--from", src)
	in := names(t, q, inbox)
	if len(in) != 3 || in[0] != "m.json" {
		t.Errorf("three deliveries of one name: inbox/ holds %q, want m.json and two suffixed copies", in)
	}
	for _, n := range in {
		if originalName(n) != "m.json" {
			t.Errorf("inbox/%q: not m.json with a collision suffix", n)
		}
	}
	r = mustRun(t, 0, "consume", q)
	if got, want := parseStats(t, r), (consumeStats{Duplicates: 3}); got != want {
		t.Errorf("consume of three more redeliveries: %+v, want %+v", got, want)
	}

	// enqueue refuses what is no message, without blocking on a FIFO and
	// without adding anything to inbox/.
	fifo := filepath.Join(src, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(src, "notes.txt")
	if err := os.WriteFile(notes, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{fifo, notes, filepath.Join(src, "missing.json"), src} {
		snap := snapshot(t, q)
		if r := runWithin(t, 30*time.Second, "enqueue", q, f); r.code == 0 {
			t.Errorf("enqueue %s: want a refusal, got\n%s", f, r)
		}
		if d := diffSnapshots(snap, snapshot(t, q)); len(d) > 0 {
			t.Errorf("enqueue %s refused, yet changed the queue: %q", f, d)
		}
	}

	// All five deliveries are kept in done/, none overwritten, each under
	// a name that is still a message named after m.json.
	got := names(t, q, done)
	if len(got) != 5 || got[0] != "m.json" {
		t.Errorf("done/ holds %q, want m.json and four suffixed copies", got)
	}
	for _, n := range got {
		if originalName(n) != "m.json" {
			t.Errorf("done/%q: not m.json with a collision suffix", n)
		}
	}
	requireEmpty(t, q, processing)
	r = mustRun(t, 0, "dups", q)
	if r.stdout != "m-1\n" {
		t.Errorf("dups: got %q, want %q", r.stdout, "m-1\n")
	}
	db := openLedger(t, q)
	if n := count(t, db, `SELECT COUNT(*) FROM processed`); n != 1 {
		t.Errorf("processed holds %d rows, want 1", n)
	}
	ds := deliveries(t, db)
	var outcomes []string
	inos := map[uint64]bool{}
	for _, d := range ds {
		outcomes = append(outcomes, d.Outcome)
		inos[d.Ino] = true
	}
	if want := []string{"processed", "duplicate", "duplicate", "duplicate", "duplicate"}; !slices.Equal(outcomes, want) {
		t.Errorf("deliveries: outcomes %q, want %q", outcomes, want)
	}
	if len(inos) != 5 {
		t.Errorf("deliveries name %d distinct files, want 5", len(inos))
	}
}

// names lists a stage's entries by name, sorted.
func names(t *testing.T, q, stage string) []string {
	t.Helper()
	var ns []string
	for _, f := range entries(t, q, stage) {
		ns = append(ns, f.Name)
	}
	slices.Sort(ns)
	return ns
}

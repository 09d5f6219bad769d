package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// TestInError: a record's file is in error/ under its name, under its
// name with a collision suffix, with its stem shortened for one, and as a
// copy or an edit of it (another inode no record has); it is not when it
// was removed, nor when its name now holds another dead letter's file.
func TestInError(t *testing.T) {
	d, l := setup(t)
	ctx := t.Context()
	ino := func(name string) uint64 {
		t.Helper()
		fi, err := os.Stat(filepath.Join(d.StagePath(queue.Error), name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	long := strings.Repeat("x", 250) + ".json"
	longSuffixed := strings.Repeat("x", 247) + "~2.json"
	for _, n := range []string{"here.json", "a~2.json", "edited.json", "gone.json", "taken.json", longSuffixed} {
		put(t, d, queue.Error, n, "{}")
	}
	recorded := map[string]uint64{ // the name each was claimed under, and its inode
		"here.json": ino("here.json"), "a.json": ino("a~2.json"), "edited.json": ino("edited.json"),
		"gone.json": ino("gone.json"), long: ino(longSuffixed),
	}
	var batch []*spool.Delivery
	i := 0
	for name, n := range recorded {
		batch = append(batch, &spool.Delivery{Claim: fmt.Sprint("c", i), File: name, Ino: n, Consumer: "c@h", Size: 2,
			Reject: &spool.RejectError{Reason: spool.ReasonParse, Detail: "bad"}, At: time.Now()})
		i++
	}
	// taken.json held a dead letter since removed; its name now holds
	// another one's file, recorded under it.
	batch = append(batch,
		&spool.Delivery{Claim: "old", File: "taken.json", Ino: 999_999_999, Consumer: "c@h", Size: 2,
			Reject: &spool.RejectError{Reason: spool.ReasonParse, Detail: "bad"}, At: time.Now()},
		&spool.Delivery{Claim: "new", File: "taken.json", Ino: ino("taken.json"), Consumer: "c@h", Size: 2,
			Reject: &spool.RejectError{Reason: spool.ReasonParse, Detail: "bad"}, At: time.Now()})
	if _, err := l.Consumer().Record(ctx, batch, spool.Work{}); err != nil {
		t.Fatal(err)
	}
	// edited.json is edited as sed -i does; gone.json removed by hand.
	path := filepath.Join(d.StagePath(queue.Error), "edited.json")
	if err := os.WriteFile(path+".tmp", []byte(`{"fixed":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(d.StagePath(queue.Error), "gone.json")); err != nil {
		t.Fatal(err)
	}

	want := map[string]bool{"here.json": true, "a.json": true, "edited.json": true, "gone.json": false, long: true,
		"taken.json/old": false, "taken.json/new": true}
	var files []ledger.DeadLetterFile
	var keys []string
	for name, n := range recorded {
		files = append(files, ledger.DeadLetterFile{File: name, Ino: n})
		keys = append(keys, name)
	}
	files = append(files, ledger.DeadLetterFile{File: "taken.json", Ino: 999_999_999}, ledger.DeadLetterFile{File: "taken.json", Ino: ino("taken.json")})
	keys = append(keys, "taken.json/old", "taken.json/new")
	present, err := NewInError(d, l).Check(ctx, files)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if present[i] != want[k] {
			t.Errorf("%s: in error/ = %v, want %v", k, present[i], want[k])
		}
	}
}

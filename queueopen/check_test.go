package queueopen_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
)

// TestCheckQueue: a new queue without a ledger is no problem, and says
// what the first consume will do; once initialised the ledger answers
// and is the queue's; a directory that is no queue is a problem with no
// finding.
func TestCheckQueue(t *testing.T) {
	ctx := context.Background()
	check := func(dir string) (map[string]string, []error) {
		var problems []error
		got := map[string]string{}
		for _, f := range queueopen.CheckQueue(ctx, dir, "", false, func(err error) { problems = append(problems, err) }) {
			got[f.Name] = f.Text
		}
		return got, problems
	}
	dir := newQueue(t)
	got, problems := check(dir)
	if len(problems) != 0 || !strings.Contains(got["queue"], "no identity yet") || !strings.Contains(got["ledger"], "none yet") ||
		!strings.HasPrefix(got["stages"], "one filesystem, each takes a new file") || got["inotify"] == "" {
		t.Errorf("a new queue: %q, problems %v", got, problems)
	}
	if _, err := queueopen.Init(ctx, dir, queueopen.Options{Use: queueopen.Write}); err != nil {
		t.Fatal(err)
	}
	got, problems = check(dir)
	d, err := queue.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := d.ID()
	_ = d.Close()
	if len(problems) != 0 || got["queue"] != dir+", identity "+id || !strings.HasSuffix(got["ledger"], ": answers, schema current, this queue's") {
		t.Errorf("an initialised queue: %q, problems %v", got, problems)
	}
	got, problems = check(filepath.Join(t.TempDir(), "none"))
	if len(got) != 0 || len(problems) != 1 {
		t.Errorf("no queue: %q, problems %v; want one problem alone", got, problems)
	}
}

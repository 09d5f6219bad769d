package replay_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/replay"
)

// deadLetters makes a queue whose error/ holds, after a real drain:
//
//	bad.json       reason parse (no key)
//	refund.json    reason handler, msg_id r1
//	late.json      reason handler, msg_id p1, which fixed.json then
//	               delivered again and had processed
func deadLetters(t *testing.T) (*queue.Dir, *ledger.DB) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "q")
	if err := queue.Init(dir); err != nil {
		t.Fatal(err)
	}
	d, err := queue.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	l, err := sqlite.Open(t.Context(), filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if _, err := ledger.Bind(t.Context(), l, d, ledger.BindWrite); err != nil {
		t.Fatal(err)
	}
	refuseNegative := spool.HandlerFunc(func(_ context.Context, _ *sql.Tx, dl *spool.Delivery) error {
		if strings.HasPrefix(string(dl.Message.Amount), "-") {
			return spool.Permanent(errors.New("negative"))
		}
		return nil
	})
	drain := func(files map[string]string) {
		for name, body := range files {
			if _, err := d.WriteFile(queue.Inbox, name, []byte(body)); err != nil {
				t.Fatal(err)
			}
		}
		c, err := spool.NewConsumer(d, l.Consumer(), spool.Config{Handler: refuseNegative})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	drain(map[string]string{
		"bad.json":    `not json`,
		"refund.json": `{"msg_id":"r1","order_no":"A","seq":1,"amount":"-5"}`,
		"late.json":   `{"msg_id":"p1","order_no":"A","seq":2,"amount":"-1"}`,
	})
	drain(map[string]string{"fixed.json": `{"msg_id":"p1","order_no":"A","seq":2,"amount":"1"}`})
	return d, l
}

// steps names the files of a plan, "-" before a skipped one.
func steps(p replay.Plan) []string {
	var out []string
	for _, s := range p.Steps {
		n := s.File
		if s.Skip {
			n = "-" + n
		}
		out = append(out, n)
	}
	return out
}

func TestSelectionCheck(t *testing.T) {
	for _, c := range []struct {
		s    replay.Selection
		want error
	}{
		{replay.Selection{}, replay.ErrNoSelection},
		{replay.Selection{Names: []string{"a.json"}, All: true}, replay.ErrManySelections},
		{replay.Selection{Reason: "parse", All: true}, replay.ErrManySelections},
		{replay.Selection{Names: []string{"../inbox/a.json"}}, queue.ErrPathLike},
		{replay.Selection{Names: []string{"a.json"}}, nil},
		{replay.Selection{Reason: "handler"}, nil},
		{replay.Selection{All: true}, nil},
	} {
		if err := c.s.Check(); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%+v.Check() = %v, want %v", c.s, err, c.want)
		}
	}
}

// TestResolve: each way of selecting, against the dead letters of a real
// drain; a dead letter whose key was processed since is skipped unless
// forced; nothing changes.
func TestResolve(t *testing.T) {
	d, l := deadLetters(t)
	ctx := t.Context()
	c := spool.DefaultContract()
	for _, tc := range []struct {
		sel   replay.Selection
		force bool
		want  []string
	}{
		{replay.Selection{All: true}, false, []string{"bad.json", "-late.json", "refund.json"}},
		{replay.Selection{All: true}, true, []string{"bad.json", "late.json", "refund.json"}},
		{replay.Selection{Reason: "handler"}, false, []string{"-late.json", "refund.json"}},
		{replay.Selection{Reason: "parse"}, false, []string{"bad.json"}},
		{replay.Selection{Reason: "no-such-reason"}, false, nil},
		// The order given, a name given twice once.
		{replay.Selection{Names: []string{"refund.json", "bad.json", "refund.json"}}, false, []string{"refund.json", "bad.json"}},
	} {
		p, err := replay.Resolve(ctx, d, l, c, tc.sel, tc.force, nil)
		if err != nil {
			t.Fatalf("Resolve(%+v): %v", tc.sel, err)
		}
		if got := steps(p); !slices.Equal(got, tc.want) {
			t.Errorf("Resolve(%+v, force=%v) = %v, want %v", tc.sel, tc.force, got, tc.want)
		}
	}
	for _, s := range mustResolve(t, d, l, replay.Selection{Names: []string{"late.json"}}).Steps {
		if s.Key != "p1" || !s.Processed {
			t.Errorf("late.json: key %q processed %v, want p1 processed", s.Key, s.Processed)
		}
	}
	if _, err := replay.Resolve(ctx, d, l, c, replay.Selection{Names: []string{"bad.json", "gone.json"}}, false, nil); !errors.Is(err, queue.ErrNotInError) {
		t.Errorf("a name not in error/: %v, want ErrNotInError", err)
	}
	if n, _ := d.Count(queue.Error); n != 3 {
		t.Errorf("error/ holds %d files after resolving, want 3", n)
	}
	if in, _ := d.Count(queue.Inbox); in != 0 {
		t.Errorf("inbox/ holds %d files after resolving, want 0", in)
	}
}

func mustResolve(t *testing.T, d *queue.Dir, l *ledger.DB, s replay.Selection) replay.Plan {
	t.Helper()
	p, err := replay.Resolve(t.Context(), d, l, spool.DefaultContract(), s, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestResumeFinishesInterruptedReplays: Resume finishes an intent a
// killed run committed (as a task's chunk), so the plan resolved after it
// does not see the file in error/ again, and its replay is recorded.
func TestResumeFinishesInterruptedReplays(t *testing.T) {
	d, l := deadLetters(t)
	ctx := t.Context()
	p := mustResolve(t, d, l, replay.Selection{Names: []string{"bad.json"}})
	items := []ledger.ReplayItem{{Idx: 0, File: "bad.json", Ino: p.Steps[0].Ino}}
	if _, err := l.Tasks().Start(ctx, ledger.TaskStart{
		Task:  ledger.TaskRecord{Kind: "replay", Files: 1, By: "carol", Via: ledger.AuditCLI},
		Files: []ledger.TaskFile{{Idx: 0, File: "bad.json", Ino: p.Steps[0].Ino}},
		Move:  ledger.TaskMove{Kind: "replay", By: "carol", At: p.Steps[0].At, Replay: items},
		Audit: ledger.AuditEntry{Actor: "carol", Via: ledger.AuditCLI, Action: "replay"},
	}); err != nil {
		t.Fatal(err)
	}
	finished, err := replay.Resume(ctx, d, l)
	if err != nil {
		t.Fatal(err)
	}
	if len(finished) != 1 || finished[0].Intent.By != "carol" || len(finished[0].Replays) != 1 {
		t.Fatalf("finished = %+v, want carol's replay of bad.json", finished)
	}
	if _, err := os.Stat(filepath.Join(d.Path(), "inbox", finished[0].Replays[0].NewName)); err != nil {
		t.Errorf("bad.json is not in inbox/: %v", err)
	}
	all := mustResolve(t, d, l, replay.Selection{All: true})
	if got := steps(all); !slices.Equal(got, []string{"-late.json", "refund.json"}) {
		t.Errorf("after Resume, error/ holds %v", got)
	}
	if log, err := l.Replays().List(ctx); err != nil || len(log) != 1 || log[0].By != "carol" {
		t.Errorf("replay log: %+v, %v; want carol's one replay", log, err)
	}
}

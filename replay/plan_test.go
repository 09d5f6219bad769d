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
		c, err := spool.NewConsumer(d, l, spool.Config{Handler: refuseNegative})
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
		p, err := replay.Resolve(ctx, d, l, c, tc.sel, tc.force)
		if err != nil {
			t.Fatalf("Resolve(%+v): %v", tc.sel, err)
		}
		if got := steps(p); !slices.Equal(got, tc.want) {
			t.Errorf("Resolve(%+v, force=%v) = %v, want %v", tc.sel, tc.force, got, tc.want)
		}
		var moved []string
		for _, f := range p.Files() {
			moved = append(moved, f.Name)
		}
		var want []string
		for _, n := range tc.want {
			if !strings.HasPrefix(n, "-") {
				want = append(want, n)
			}
		}
		if !slices.Equal(moved, want) {
			t.Errorf("Files() = %v, want %v", moved, want)
		}
	}
	for _, s := range mustResolve(t, d, l, replay.Selection{Names: []string{"late.json"}}).Steps {
		if s.Key != "p1" || !s.Processed {
			t.Errorf("late.json: key %q processed %v, want p1 processed", s.Key, s.Processed)
		}
	}
	if _, err := replay.Resolve(ctx, d, l, c, replay.Selection{Names: []string{"bad.json", "gone.json"}}, false); !errors.Is(err, queue.ErrNotInError) {
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
	p, err := replay.Resolve(t.Context(), d, l, spool.DefaultContract(), s, false)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExecute: a plan, resolved under the replay lock, moves its files to
// inbox/ and records one replay each; the skipped file stays.
func TestExecute(t *testing.T) {
	d, l := deadLetters(t)
	ctx := t.Context()
	unlock, finished, err := replay.Lock(ctx, d, l)
	if err != nil {
		t.Fatal(err)
	}
	if len(finished) != 0 {
		t.Errorf("Lock finished %d replays on a queue that had none", len(finished))
	}
	p := mustResolve(t, d, l, replay.Selection{Reason: "handler"})
	recs, err := replay.Execute(ctx, d, l, p, "alice", "fixed the refunds")
	if uerr := unlock(); uerr != nil {
		t.Fatal(uerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].File != "refund.json" || recs[0].By != "alice" {
		t.Fatalf("records = %+v, want alice's replay of refund.json", recs)
	}
	if _, err := os.Stat(filepath.Join(d.Path(), "inbox", recs[0].NewName)); err != nil {
		t.Errorf("refund.json is not in inbox/: %v", err)
	}
	for _, name := range []string{"bad.json", "late.json"} {
		if _, err := os.Stat(filepath.Join(d.Path(), "error", name)); err != nil {
			t.Errorf("%s left error/: %v", name, err)
		}
	}
	log, err := l.Replays(ctx)
	if err != nil || len(log) != 1 {
		t.Fatalf("replay log: %d rows, %v; want 1", len(log), err)
	}
	// An empty plan records nothing.
	if recs, err := replay.Execute(ctx, d, l, replay.Plan{}, "bob", ""); err != nil || recs != nil {
		t.Errorf("an empty plan: %v, %v", recs, err)
	}
	if log, _ := l.Replays(ctx); len(log) != 1 {
		t.Errorf("an empty plan was recorded: %d replay rows", len(log))
	}
}

// TestLockFinishesInterruptedReplays: Lock finishes an intent a killed run
// committed before the plan is resolved, so the plan does not see the
// file in error/ again.
func TestLockFinishesInterruptedReplays(t *testing.T) {
	d, l := deadLetters(t)
	ctx := t.Context()
	p := mustResolve(t, d, l, replay.Selection{Names: []string{"bad.json"}})
	items := []ledger.ReplayItem{{Idx: 0, File: "bad.json", Ino: p.Steps[0].Ino}}
	if _, err := l.BeginReplay(ctx, "carol", "", p.Steps[0].At, items); err != nil {
		t.Fatal(err)
	}
	unlock, finished, err := replay.Lock(ctx, d, l)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if len(finished) != 1 || finished[0].Intent.By != "carol" {
		t.Fatalf("finished = %+v, want carol's replay", finished)
	}
	all := mustResolve(t, d, l, replay.Selection{All: true})
	if got := steps(all); !slices.Equal(got, []string{"-late.json", "refund.json"}) {
		t.Errorf("after Lock, error/ holds %v", got)
	}
}

// TestDigest: resolving one selection twice gives one digest; a file the
// plan would move that was replayed meanwhile, or a forced plan, changes
// it.
func TestDigest(t *testing.T) {
	d, l := deadLetters(t)
	ctx := t.Context()
	all := replay.Selection{All: true}
	first := mustResolve(t, d, l, all).Digest()
	if again := mustResolve(t, d, l, all).Digest(); again != first {
		t.Errorf("one selection resolved twice: %s, then %s", first, again)
	}
	forced, err := replay.Resolve(ctx, d, l, spool.DefaultContract(), all, true)
	if err != nil {
		t.Fatal(err)
	}
	if forced.Digest() == first {
		t.Error("a forced plan, which moves late.json too, has the same digest")
	}
	unlock, _, err := replay.Lock(ctx, d, l)
	if err != nil {
		t.Fatal(err)
	}
	_, err = replay.Execute(ctx, d, l, mustResolve(t, d, l, replay.Selection{Names: []string{"bad.json"}}), "alice", "")
	if uerr := unlock(); uerr != nil {
		t.Fatal(uerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if after := mustResolve(t, d, l, all).Digest(); after == first {
		t.Error("bad.json was replayed, but --all has the same digest as before")
	}
	if empty := (replay.Plan{}).Digest(); len(empty) != 64 {
		t.Errorf("the empty plan's digest %q is not a hex SHA-256", empty)
	}
}

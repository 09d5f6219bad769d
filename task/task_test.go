package task_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/replay"
	"github.com/spoolq/spool/task"
)

// deadQueue makes a queue whose error/ holds n dead letters after a real
// drain: d000.json... each a valid message (msg_id mNNN, order_no A or B
// by parity) its handler refused.
func deadQueue(t *testing.T, n int) (*queue.Dir, *ledger.DB) {
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
	for i := range n {
		order := "A"
		if i%2 == 1 {
			order = "B"
		}
		body := fmt.Sprintf(`{"msg_id":"m%03d","order_no":%q,"seq":%d,"amount":"1"}`, i, order, i+1)
		if _, err := d.WriteFile(queue.Inbox, fmt.Sprintf("d%03d.json", i), []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	refuse := spool.HandlerFunc(func(_ context.Context, _ *sql.Tx, dl *spool.Delivery) error {
		return spool.Permanent(fmt.Errorf("refused %s", dl.Message.MsgID))
	})
	c, err := spool.NewConsumer(d, l.Consumer(), spool.Config{Handler: refuse})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	return d, l
}

func names(t *testing.T, d *queue.Dir, s queue.Stage) []string {
	t.Helper()
	var out []string
	if err := d.List(s, func(e queue.Entry) error { out = append(out, e.Name); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestApprovalFlow: a replay over the policy waits; its requester's
// approval and a viewer's are refused; another approver's is taken, and
// the run moves exactly the set; each step is an audit row.
func TestApprovalFlow(t *testing.T) {
	d, l := deadQueue(t, 6)
	s := &task.Service{Dir: d, Ledger: l, Contract: spool.DefaultContract(), Policy: task.Policy{Set: true, ReplayOver: 2, DiscardOver: -1}, Host: "h", PID: 1}
	ctx := t.Context()
	alice := task.Identity{Name: "alice", Role: task.RoleOperator, Via: ledger.AuditHTTP}
	bob := task.Identity{Name: "bob", Role: task.RoleApprover, Via: ledger.AuditHTTP}
	req := task.Request{Kind: task.Replay, Selection: task.Selection{OrderNo: "A"}, Note: "fixed"}
	p, err := s.Preview(ctx, req)
	if err != nil || p.Count != 3 || !p.NeedsApproval {
		t.Fatalf("preview %+v, %v", p, err)
	}
	tk, _, err := s.Create(ctx, alice, req)
	if err != nil || tk.State != task.StateWaiting || tk.Files != 3 || tk.Digest != p.Digest {
		t.Fatalf("create %+v, %v", tk, err)
	}
	if _, err := s.Run(ctx, bob, tk.ID, task.RunOptions{}); !errors.Is(err, task.ErrState) {
		t.Fatalf("run of a waiting task: %v", err)
	}
	if _, err := s.Approve(ctx, task.Identity{Name: "alice", Role: task.RoleApprover, Via: ledger.AuditHTTP}, tk.ID, tk.Digest); !errors.Is(err, task.ErrOwnRequest) {
		t.Fatalf("own approval: %v", err)
	}
	if _, err := s.Approve(ctx, task.Identity{Name: "carol", Role: task.RoleOperator, Via: ledger.AuditHTTP}, tk.ID, tk.Digest); !errors.Is(err, task.ErrForbidden) {
		t.Fatalf("operator's approval: %v", err)
	}
	if tk, err = s.Approve(ctx, bob, tk.ID, tk.Digest); err != nil || tk.State != task.StateApproved || tk.ApprovedBy != "bob" {
		t.Fatalf("approve %+v, %v", tk, err)
	}
	tk, err = s.Run(ctx, bob, tk.ID, task.RunOptions{})
	if err != nil || tk.State != task.StateDone || tk.Done != 3 {
		t.Fatalf("run %+v, %v", tk, err)
	}
	if got, want := names(t, d, queue.Inbox), []string{"d000.json", "d002.json", "d004.json"}; !slices.Equal(got, want) {
		t.Fatalf("inbox %q, want %q", got, want)
	}
	rows, err := l.Audit().List(ctx, ledger.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		if r.Task == tk.ID {
			got = append(got, fmt.Sprintf("%s %s %s %s", r.Actor, r.Role, r.Action, r.Outcome))
		}
	}
	want := []string{"alice operator replay ok", "bob approver run refused", "alice approver approve refused",
		"carol operator approve refused", "bob approver approve ok", "bob approver run ok"}
	if !slices.Equal(got, want) {
		t.Fatalf("audit:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestApproveStale: a file fixed and one replayed since the request are
// reported at approval, which is refused, nothing moved.
func TestApproveStale(t *testing.T) {
	d, l := deadQueue(t, 4)
	s := &task.Service{Dir: d, Ledger: l, Contract: spool.DefaultContract(), Policy: task.Policy{Set: true, ReplayOver: 0, DiscardOver: 0}}
	ctx := t.Context()
	tk, _, err := s.Create(ctx, task.CLI("alice"), task.Request{Kind: task.Discard, Selection: task.Selection{All: true}, Note: "junk"})
	if err != nil || tk.State != task.StateWaiting {
		t.Fatalf("create %+v, %v", tk, err)
	}
	if err := os.WriteFile(filepath.Join(d.StagePath(queue.Error), "d001.json"), []byte(`{"msg_id":"m001","order_no":"B","seq":2,"amount":"2"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(d.StagePath(queue.Error), "d002.json"), filepath.Join(d.StagePath(queue.Inbox), "d002.json")); err != nil {
		t.Fatal(err)
	}
	_, err = s.Approve(ctx, task.CLI("bob"), tk.ID, tk.Digest)
	var stale *task.StaleError
	if !errors.As(err, &stale) || len(stale.Changed) != 2 || stale.Changed[0].File != "d001.json" || stale.Changed[1].File != "d002.json" {
		t.Fatalf("approve: %v", err)
	}
	if now, _ := s.Get(ctx, tk.ID); now.State != task.StateWaiting {
		t.Fatalf("state %s after a stale approval", now.State)
	}
	if got := names(t, d, queue.Error); len(got) != 3 {
		t.Fatalf("error/ %q", got)
	}
}

// TestCancelRunning: a cancel between chunks stops the run; every file is
// moved or still in error/.
func TestCancelRunning(t *testing.T) {
	d, l := deadQueue(t, 5)
	s := &task.Service{Dir: d, Ledger: l, Contract: spool.DefaultContract(), Policy: task.NoPolicy}
	ctx := t.Context()
	tk, _, err := s.Create(ctx, task.CLI("alice"), task.Request{Kind: task.Replay, Selection: task.Selection{All: true}, Rate: 1})
	if err != nil || tk.State != task.StateApproved {
		t.Fatalf("create %+v, %v", tk, err)
	}
	chunks := 0
	tk, err = s.Run(ctx, task.CLI("alice"), tk.ID, task.RunOptions{OnChunk: func(c task.Chunk) {
		chunks++
		if chunks == 2 {
			if _, err := s.Cancel(ctx, task.CLI("bob"), c.Task.ID); err != nil {
				t.Error(err)
			}
		}
	}})
	if err != nil || tk.State != task.StateCancelled || tk.Done != 2 {
		t.Fatalf("run %+v, %v", tk, err)
	}
	if in, er := names(t, d, queue.Inbox), names(t, d, queue.Error); len(in) != 2 || len(er) != 3 {
		t.Fatalf("inbox %q, error %q", in, er)
	}
	if _, err := s.Cancel(ctx, task.CLI("bob"), tk.ID); !errors.Is(err, task.ErrState) {
		t.Fatalf("second cancel: %v", err)
	}
}

func TestParsePolicy(t *testing.T) {
	for _, c := range []struct {
		in   string
		want task.Policy
		err  string
	}{
		{`{"replay_over": 100, "discard_over": 0}`, task.Policy{Set: true, ReplayOver: 100, DiscardOver: 0}, ""},
		{`{"replay_over": 5}`, task.Policy{Set: true, ReplayOver: 5, DiscardOver: -1}, ""},
		{`{}`, task.Policy{Set: true, ReplayOver: -1, DiscardOver: -1}, ""},
		{`{"Replay_over": 5}`, task.Policy{}, "unknown key"},
		{`{"replay_over": 5, "replay_over": 6}`, task.Policy{}, "twice"},
		{`{"replay_over": -1}`, task.Policy{}, ">= 0"},
		{`{"replay_over": 1.5}`, task.Policy{}, "whole number"},
		{`{"replay_over": null}`, task.Policy{}, "whole number"},
		{`[1]`, task.Policy{}, "object"},
	} {
		p, err := task.ParsePolicy([]byte(c.in))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || p != c.want {
			t.Errorf("%s: %+v, %v", c.in, p, err)
		}
	}
}

func TestParseTokens(t *testing.T) {
	sum := sha256.Sum256([]byte("s3cret"))
	h1 := hex.EncodeToString(sum[:])
	in := "# tokens\nalice operator " + strings.Repeat("ab", 32) + "\n\n  bob approver " + strings.ToUpper(h1) + "  # admin\n"
	ts, err := task.ParseTokens(strings.NewReader(in))
	if err != nil || len(ts) != 2 || ts[1].Name != "bob" || ts[1].Role != task.RoleApprover {
		t.Fatalf("%+v, %v", ts, err)
	}
	if id, err := ts.Identify("s3cret"); err != nil || id.Name != "token:bob" || id.Role != task.RoleApprover || id.Via != ledger.AuditHTTP {
		t.Fatalf("identify: %+v, %v", id, err)
	}
	if _, err := ts.Identify("nope"); !errors.Is(err, task.ErrUnknownToken) {
		t.Fatalf("identify: %v", err)
	}
	for _, bad := range []string{"alice operator", "alice root " + h1, "alice viewer xyz", "a viewer " + h1 + "\na operator " + strings.Repeat("ef", 32)} {
		if _, err := task.ParseTokens(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestDiscardTo: a discard task moves its files to its To directory, each
// recorded as a discard with its body's hash; a file found changed at its
// chunk is left in error/ and counted.
func TestDiscardTo(t *testing.T) {
	d, l := deadQueue(t, 3)
	kept := filepath.Join(filepath.Dir(d.Path()), "kept")
	if err := os.Mkdir(kept, 0o750); err != nil {
		t.Fatal(err)
	}
	s := &task.Service{Dir: d, Ledger: l, Contract: spool.DefaultContract(), Policy: task.NoPolicy}
	ctx := t.Context()
	tk, p, err := s.Create(ctx, task.CLI("alice"), task.Request{Kind: task.Discard, Selection: task.Selection{All: true}, Note: "old", To: kept})
	if err != nil || tk.State != task.StateApproved || p.Count != 3 {
		t.Fatalf("create %+v, %v", tk, err)
	}
	if err := os.WriteFile(filepath.Join(d.StagePath(queue.Error), "d002.json"), []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	var changed []string
	tk, err = s.Run(ctx, task.CLI("alice"), tk.ID, task.RunOptions{OnChunk: func(c task.Chunk) {
		for _, f := range c.Changed {
			changed = append(changed, f.File+": "+f.ChangedWhy)
		}
	}})
	if err != nil || tk.State != task.StateDone || tk.Done != 2 || tk.Changed != 1 {
		t.Fatalf("run %+v, %v", tk, err)
	}
	if want := []string{"d002.json: its body changed"}; !slices.Equal(changed, want) {
		t.Errorf("changed %q, want %q", changed, want)
	}
	ents, err := os.ReadDir(kept)
	if err != nil || len(ents) != 2 || ents[0].Name() != "d000.json" || ents[1].Name() != "d001.json" {
		t.Fatalf("kept/ %v, %v", ents, err)
	}
	if got := names(t, d, queue.Error); !slices.Equal(got, []string{"d002.json"}) {
		t.Fatalf("error/ %q", got)
	}
	bs, err := l.Discards().Of(ctx, "m000", nil)
	if err != nil || len(bs) != 1 || bs[0].ToDir != kept || bs[0].Items[0].Outcome != ledger.DiscardMoved || bs[0].Items[0].ContentHash == "" {
		t.Fatalf("discards of m000: %+v, %v", bs, err)
	}
	fs, err := s.Page(ctx, tk, 0, 0)
	if err != nil || len(fs.Items) != 3 || fs.Items[2].Changed != "its body changed" || fs.Items[0].Changed != "" || fs.Next != nil {
		t.Fatalf("files %+v, %v", fs, err)
	}
}

// TestOneMoveTask: a replay run at once (Service.Do, without a rate) is a
// task like the others; killed after its first and only chunk was begun
// (here: begun as Do begins it, with ledger.Tasks.Start), it is listed
// running with every file begun, a cancel is refused (the move finishes
// all or nothing) and audited, and finishing the move (as the next
// replay, consume or fsck --repair would) ends it done.
func TestOneMoveTask(t *testing.T) {
	d, l := deadQueue(t, 3)
	s := &task.Service{Dir: d, Ledger: l, Contract: spool.DefaultContract(), Policy: task.NoPolicy}
	ctx := t.Context()
	var items []ledger.ReplayItem
	var files []ledger.TaskFile
	for i, n := range names(t, d, queue.Error) {
		fi, err := os.Stat(filepath.Join(d.StagePath(queue.Error), n))
		if err != nil {
			t.Fatal(err)
		}
		ino := fi.Sys().(*syscall.Stat_t).Ino
		items = append(items, ledger.ReplayItem{Idx: i, File: n, Ino: ino})
		files = append(files, ledger.TaskFile{Idx: i, File: n, Ino: ino})
	}
	// What Do commits before its first move: the run killed here.
	st, err := l.Tasks().Start(ctx, ledger.TaskStart{
		Task:  ledger.TaskRecord{Kind: "replay", Files: 3, By: "alice", Via: ledger.AuditCLI, Request: `{"kind":"replay","selection":{"all":true}}`},
		Files: files,
		Move:  ledger.TaskMove{Kind: "replay", By: "alice", At: time.Now(), Replay: items},
		Audit: ledger.AuditEntry{Actor: "alice", Via: ledger.AuditCLI, Action: "replay"},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := st.Task
	ts, err := s.List(ctx, ledger.TaskQuery{})
	if err != nil || len(ts) != 1 || ts[0].ID != id || ts[0].State != task.StateRunning || ts[0].Next != 3 || !ts[0].Request.Selection.All {
		t.Fatalf("List = %+v, %v", ts, err)
	}
	if _, err := s.Cancel(ctx, task.CLI("bob"), id); !errors.Is(err, task.ErrState) {
		t.Fatalf("cancel of a move under way: %v, want ErrState", err)
	}
	rows, err := l.Audit().List(ctx, ledger.AuditQuery{})
	if err != nil || len(rows) == 0 || rows[len(rows)-1].Action != "cancel" || rows[len(rows)-1].Outcome != ledger.AuditRefused {
		t.Fatalf("audit after the refused cancel: %+v, %v", rows, err)
	}
	if _, err := replay.Resume(ctx, d, l); err != nil {
		t.Fatal(err)
	}
	tk, err := s.Get(ctx, id)
	if err != nil || tk.State != task.StateDone || tk.Done != 3 {
		t.Fatalf("after the move was finished: %+v, %v", tk, err)
	}
	if got := names(t, d, queue.Inbox); len(got) != 3 {
		t.Fatalf("inbox %q", got)
	}
}

// TestDoAtRate: a replay asked at a rate whose chunk is larger than the
// set runs it whole; one whose chunk is smaller moves it chunk by chunk,
// each reported, and both end done with every file in inbox/ and one
// audit row (the request's, spanning its run).
func TestDoAtRate(t *testing.T) {
	for _, c := range []struct {
		rate   float64
		chunks int
	}{{1000, 1}, {10, 4}} {
		d, l := deadQueue(t, 4)
		s := &task.Service{Dir: d, Ledger: l, Contract: spool.DefaultContract(), Policy: task.NoPolicy}
		chunks := 0
		tk, err := s.Do(t.Context(), task.CLI("alice"), task.Request{Kind: task.Replay, Selection: task.Selection{All: true}, Rate: c.rate},
			task.RunOptions{OnChunk: func(task.Chunk) { chunks++ }})
		if err != nil || tk.State != task.StateDone || tk.Done != 4 || chunks != c.chunks {
			t.Fatalf("rate %v: %+v, %v, %d chunks; want done, 4 files in %d chunks", c.rate, tk, err, chunks, c.chunks)
		}
		if got := names(t, d, queue.Inbox); len(got) != 4 {
			t.Fatalf("rate %v: inbox %q", c.rate, got)
		}
		rows, err := l.Audit().List(t.Context(), ledger.AuditQuery{})
		if err != nil || len(rows) != 1 || rows[0].Action != "replay" || rows[0].Task != tk.ID || rows[0].Outcome != ledger.AuditOK || rows[0].Counts["done"] != 4 {
			t.Fatalf("rate %v: audit %+v, %v", c.rate, rows, err)
		}
	}
}

package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
)

// drain consumes q's inbox in-process with a business handler that fails
// permanently for the msg_ids in fail (a dead letter with reason handler,
// one attempt) and succeeds for the others.
func drain(t *testing.T, q string, fail ...string) spool.Stats {
	t.Helper()
	ctx := context.Background()
	d, err := queue.Open(q)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l, err := sqlite.Open(ctx, filepath.Join(q, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h := spool.HandlerFunc(func(_ context.Context, _ *sql.Tx, d *spool.Delivery) error {
		m := d.Message
		if slices.Contains(fail, m.MsgID) {
			return spool.Permanent(errors.New("order " + m.OrderNo + " is closed"))
		}
		return nil
	})
	c, err := spool.NewConsumer(d, l.Consumer(), spool.Config{Handler: h, Retry: spool.Retry{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Drain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// withLedger runs fn on q's ledger.
func withLedger(t *testing.T, q string, fn func(l *ledger.DB)) {
	t.Helper()
	l, err := sqlite.Open(context.Background(), filepath.Join(q, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fn(l)
}

// ledgerInt runs a query returning one integer on q's ledger.
func ledgerInt(t *testing.T, q, query string, args ...any) int {
	t.Helper()
	var n int
	withLedger(t, q, func(l *ledger.DB) {
		if err := l.SQL().QueryRow(query, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	})
	return n
}

// deadLetterQueue makes a queue whose error/ holds a.json and b.json (the
// handler failed for m1, m2), c.json (missing-field, msg_id m3) and d.json
// (parse).
func deadLetterQueue(t *testing.T) string {
	t.Helper()
	q := newQueue(t)
	in := filepath.Join(q, "inbox")
	write(t, filepath.Join(in, "a.json"), msg("m1", "O1", 1, `"10.00"`))
	write(t, filepath.Join(in, "b.json"), msg("m2", "O2", 1, `"20.00"`))
	write(t, filepath.Join(in, "c.json"), `{"msg_id":"m3","order_no":"O3","seq":1}`)
	write(t, filepath.Join(in, "d.json"), `not json`)
	if st := drain(t, q, "m1", "m2"); st.DeadLetters != 4 {
		t.Fatalf("drain: %+v, want 4 dead letters", st)
	}
	cli(t, "errors", q).want(t, 0, "file,reason\na.json,handler\nb.json,handler\nc.json,missing-field\nd.json,parse\n")
	return q
}

func TestReplayByReason(t *testing.T) {
	q := deadLetterQueue(t)
	before := listing(t, q)
	cli(t, "replay", q, "--reason", "handler", "--dry-run").
		want(t, 0, "would replay a.json\nwould replay b.json\n")
	if after := listing(t, q); after != before {
		t.Fatalf("a dry run changed the queue:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := replays(t, q); len(got) != 0 {
		t.Fatalf("a dry run recorded replays: %v", got)
	}

	cli(t, "replay", q, "--reason", "handler", "--by", "alice", "--note", "order reopened").
		want(t, 0, "replayed a.json -> inbox/a.json\nreplayed b.json -> inbox/b.json\n")
	if got, want := names(t, filepath.Join(q, "error")), []string{"c.json", "d.json"}; !slices.Equal(got, want) {
		t.Errorf("error/ = %v, want %v", got, want)
	}
	if got, want := names(t, filepath.Join(q, "inbox")), []string{"a.json", "b.json"}; !slices.Equal(got, want) {
		t.Errorf("inbox/ = %v, want %v", got, want)
	}
	want := []string{"a.json>a.json by alice: order reopened", "b.json>b.json by alice: order reopened"}
	if got := replays(t, q); !slices.Equal(got, want) {
		t.Errorf("replays = %v, want %v", got, want)
	}

	// A known reason nothing has: a warning, exit 0, nothing moved.
	unchanged := refusals(t, q)
	r := cli(t, "replay", q, "--reason", "too-large")
	if r.code != 0 || r.stdout != "" {
		t.Errorf("unmatched reason: exit %d stdout %q", r.code, r.stdout)
	}
	checkOneLine(t, r.stderr, "replay", `no dead letter in error/ has reason "too-large"`)
	// A typo, no reason at all: exit 2 with the reasons there are.
	r = cli(t, "replay", q, "--reason", "hanlder")
	if r.code != 2 || r.stdout != "" {
		t.Errorf("unknown reason: exit %d stdout %q", r.code, r.stdout)
	}
	checkOneLine(t, r.stderr, "replay", `--reason "hanlder": no dead letter has it and it is no reason spool gives; in error/ now: missing-field, parse;`)
	requireRefusedOnly(t, q, unchanged)
}

func TestReplayAll(t *testing.T) {
	q := deadLetterQueue(t)
	before := listing(t, q)
	cli(t, "replay", q, "--all", "--dry-run").
		want(t, 0, "would replay a.json\nwould replay b.json\nwould replay c.json\nwould replay d.json\n")
	if after := listing(t, q); after != before {
		t.Fatalf("a dry run changed the queue:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := replays(t, q); len(got) != 0 {
		t.Fatalf("a dry run recorded replays: %v", got)
	}
	cli(t, "replay", q, "--all").want(t, 0, "replayed a.json -> inbox/a.json\nreplayed b.json -> inbox/b.json\n"+
		"replayed c.json -> inbox/c.json\nreplayed d.json -> inbox/d.json\n")
	if n := len(names(t, filepath.Join(q, "error"))); n != 0 {
		t.Errorf("error/ holds %d files after --all", n)
	}
	u := osUser()
	want := []string{"a.json>a.json by " + u + ": ", "b.json>b.json by " + u + ": ", "c.json>c.json by " + u + ": ", "d.json>d.json by " + u + ": "}
	if got := replays(t, q); !slices.Equal(got, want) {
		t.Errorf("replays = %v, want %v", got, want)
	}
	r := cli(t, "replay", q, "--all")
	if r.code != 0 || r.stdout != "" {
		t.Errorf("--all on an empty error/: exit %d stdout %q", r.code, r.stdout)
	}
	checkOneLine(t, r.stderr, "replay", "nothing to replay")
}

// TestReplaySkipsProcessed: dead letters whose msg_id was processed since
// (sent again, fixed) are skipped and reported, unless forced.
func TestReplaySkipsProcessed(t *testing.T) {
	q := deadLetterQueue(t)
	in := filepath.Join(q, "inbox")
	// m1 sent again and processed; m3 sent again with its amount. The key
	// of c.json (missing-field) is not in the ledger: it is read from the
	// file.
	write(t, filepath.Join(in, "a-resend.json"), msg("m1", "O1", 1, `"10.00"`))
	write(t, filepath.Join(in, "c-fixed.json"), msg("m3", "O3", 1, `"30.00"`))
	if st := drain(t, q); st.Processed != 2 {
		t.Fatalf("drain of the resends: %+v", st)
	}
	before := listing(t, q)
	cli(t, "replay", q, "--all", "--dry-run").want(t, 0, "skip a.json: msg_id m1 already processed\n"+
		"would replay b.json\nskip c.json: msg_id m3 already processed\nwould replay d.json\n")
	cli(t, "replay", q, "a.json", "c.json").
		want(t, 0, "skip a.json: msg_id m1 already processed\nskip c.json: msg_id m3 already processed\n")
	if after := listing(t, q); after != before {
		t.Fatalf("skipped replays changed the queue:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := replays(t, q); len(got) != 0 {
		t.Fatalf("skipped replays were recorded: %v", got)
	}
	// --reason still skips; --force requeues.
	cli(t, "replay", q, "--reason", "missing-field").want(t, 0, "skip c.json: msg_id m3 already processed\n")
	cli(t, "replay", q, "a.json", "--force", "--by", "bob", "--note", "on purpose").
		want(t, 0, "replayed a.json -> inbox/a.json\n")
	if got, want := replays(t, q), []string{"a.json>a.json by bob: on purpose"}; !slices.Equal(got, want) {
		t.Errorf("replays = %v, want %v", got, want)
	}
	// The ledger absorbs it: a plain duplicate (same body), no conflict.
	cli(t, "consume", q).want(t, 0, "processed=0 duplicates=1 dead-letters=0 recovered=0\n")
	cli(t, "dups", q, "--conflicts").want(t, 0, "msg_id,processed_file,processed_hash,duplicate_file,duplicate_hash,at\n")
}

// TestReplayedFailureKeepsHistory: a replayed message that fails again is
// back in error/ with both failures and the replay on record.
func TestReplayedFailureKeepsHistory(t *testing.T) {
	q := newQueue(t)
	write(t, filepath.Join(q, "inbox", "a.json"), msg("m1", "O1", 1, `"10.00"`))
	drain(t, q, "m1")
	cli(t, "replay", q, "a.json", "--by", "alice", "--note", "try again").want(t, 0, "replayed a.json -> inbox/a.json\n")
	if st := drain(t, q, "m1"); st.DeadLetters != 1 {
		t.Fatalf("second drain: %+v", st)
	}
	// The plain CSV is unchanged: the file once, its reason.
	cli(t, "errors", q).want(t, 0, "file,reason\na.json,handler\n")
	ino := inode(t, filepath.Join(q, "error", "a.json"))
	if n := ledgerInt(t, q, `SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter' AND ino = ?`, int64(ino)); n != 2 {
		t.Errorf("dead-letter records of the file: %d, want 2 (both failures kept)", n)
	}

	r := cli(t, "errors", q, "--json")
	if r.code != 0 {
		t.Fatalf("errors --json: exit %d: %s", r.code, r.stderr)
	}
	var got []struct {
		File             string  `json:"file"`
		Reason           string  `json:"reason"`
		MsgID            *string `json:"msg_id"`
		Attempts         int     `json:"attempts"`
		ConsumerPID      *int    `json:"consumer_pid"`
		Replays          int     `json:"replays"`
		PreviousFailures int     `json:"previous_failures"`
		History          []struct {
			Event, File, Reason, Detail, By, Note, NewName string
		} `json:"history"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("errors --json: %v\n%s", err, r.stdout)
	}
	if len(got) != 1 {
		t.Fatalf("%d objects, want 1:\n%s", len(got), r.stdout)
	}
	g := got[0]
	if g.File != "a.json" || g.Reason != "handler" || g.MsgID == nil || *g.MsgID != "m1" || g.Attempts != 1 ||
		g.ConsumerPID == nil || *g.ConsumerPID != os.Getpid() || g.Replays != 1 || g.PreviousFailures != 1 {
		t.Errorf("object = %+v", g)
	}
	if len(g.History) != 2 || g.History[0].Event != "dead-letter" || g.History[0].Detail != "order O1 is closed" ||
		g.History[1].Event != "replay" || g.History[1].By != "alice" || g.History[1].Note != "try again" {
		t.Errorf("history = %+v", g.History)
	}

	r = cli(t, "errors", q, "--long")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 2 {
		t.Fatalf("errors --long: exit %d:\n%s", r.code, r.stdout)
	}
	f := strings.Fields(lines[1])
	host, _, _ := strings.Cut(f[5], ":")
	if f[0] != "a.json" || f[1] != "handler" || f[2] != "1" || f[5] != host+":"+strconv.Itoa(os.Getpid()) ||
		f[6] != "-" || f[7] != "1" || f[8] != "1" || strings.Join(f[9:], " ") != "order O1 is closed" {
		t.Errorf("errors --long row: %q", lines[1])
	}
}

func TestReplayRefusalsChangeNothing(t *testing.T) {
	q := deadLetterQueue(t)
	before := refusals(t, q)
	for _, tt := range []struct {
		args []string
		code int
		sub  string
	}{
		{[]string{"replay", q}, 2, "missing FILE (or --reason R, or --all)"},
		{[]string{"replay", q, "a.json", "--all"}, 2, "not several"},
		{[]string{"replay", q, "--reason", "handler", "--all"}, 2, "not several"},
		{[]string{"replay", q, "a.json", "--reason", "handler"}, 2, "not several"},
		{[]string{"replay", q, "--reason", ""}, 2, "--reason is empty"},
		{[]string{"replay", q, "../x.json", "--dry-run"}, 2, "path-like"},
		{[]string{"replay", q, "a.json", "error/b.json"}, 2, "path-like"},
		{[]string{"replay", q, "a.json", "nope.json"}, 1, "nope.json"},
		{[]string{"replay", q, "nope.json", "--dry-run"}, 1, "nope.json"},
		{[]string{"replay", q, "a.json", "notes.txt", "--force"}, 1, "notes.txt"},
		{[]string{"replay", q, "--all", "--bogus"}, 2, "-bogus"},
	} {
		t.Run(strings.Join(tt.args[2:], " "), func(t *testing.T) {
			cli(t, tt.args...).wantFail(t, tt.code, "replay", tt.sub)
		})
	}
	requireRefusedOnly(t, q, before)
	if got := replays(t, q); len(got) != 0 {
		t.Fatalf("a refused replay was recorded: %v", got)
	}
}

func TestReplaysListing(t *testing.T) {
	q := deadLetterQueue(t)
	cli(t, "replays", q).want(t, 0, "at,file,new_name,by,note\n")
	cli(t, "replays", q, "--json").want(t, 0, "[]\n")
	// A newer a.json waits in inbox/, so the replayed one gets a suffix.
	write(t, filepath.Join(q, "inbox", "a.json"), msg("m9", "O9", 1, "1"))
	cli(t, "replay", q, "a.json", "--by", "alice", "--note", "fixed, upstream").want(t, 0, "replayed a.json -> inbox/a~2.json\n")
	cli(t, "replay", q, "--reason", "parse", "--by", "bob").want(t, 0, "replayed d.json -> inbox/d.json\n")

	r := cli(t, "replays", q)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 3 || lines[0] != "at,file,new_name,by,note" {
		t.Fatalf("replays: exit %d:\n%s", r.code, r.stdout)
	}
	var ats []string
	for i, want := range []string{`,a.json,a~2.json,alice,"fixed, upstream"`, ",d.json,d.json,bob,"} {
		at, rest, _ := strings.Cut(lines[i+1], ",")
		if ","+rest != want {
			t.Errorf("line %d = %q, want ...%s", i+1, lines[i+1], want)
		}
		ats = append(ats, at)
	}
	if !slices.IsSorted(ats) || len(ats[0]) != len(ledger.TimeLayout) {
		t.Errorf("times %v: want the ledger's layout, oldest first", ats)
	}

	r = cli(t, "replays", q, "--json")
	var got []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 2 {
		t.Fatalf("replays --json: %v\n%s", err, r.stdout)
	}
	if got[0]["file"] != "a.json" || got[0]["new_name"] != "a~2.json" || got[0]["by"] != "alice" ||
		got[0]["note"] != "fixed, upstream" || got[0]["ino"] == nil || got[1]["note"] != nil || got[1]["at"] != ats[1] {
		t.Errorf("replays --json = %v", got)
	}
	cli(t, "replays").wantFail(t, 2, "replays", "missing DIR")
	cli(t, "replays", q, "extra").wantFail(t, 2, "replays", "unexpected argument")
}

// inode returns the inode number of path.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

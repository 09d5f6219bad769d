package task_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/task"
)

// TestRequestWhat checks the one line a request is listed by: the
// selection, then the filters and options in the command line's words.
func TestRequestWhat(t *testing.T) {
	since := time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	for _, c := range []struct {
		req  task.Request
		want string
	}{
		{task.Request{Selection: task.Selection{Names: []string{"a.json"}}}, "a.json"},
		{task.Request{Selection: task.Selection{Names: []string{"a", "b"}}}, "2 names"},
		{task.Request{Selection: task.Selection{Reason: "parse-error", Since: since}, Force: true}, "reason parse-error --since 2025-01-02T02:04:05Z --force"},
		{task.Request{Selection: task.Selection{All: true, MsgID: "m1"}, To: "/x", Rate: 2.5}, "all --msg-id m1 --to /x --rate 2.5"},
	} {
		if got := c.req.What(); got != c.want {
			t.Errorf("What() = %q, want %q", got, c.want)
		}
	}
}

// TestWritePreview checks that a dry run lists each file with the skips
// in the selection's order, and that an empty selection is a warning,
// not output.
func TestWritePreview(t *testing.T) {
	var b bytes.Buffer
	req := task.Request{Kind: task.Replay, Selection: task.Selection{All: true}}
	if w := task.WritePreview(&b, req, task.Preview{}, true); b.Len() != 0 || w != "error/ holds no dead letter: nothing to replay" {
		t.Errorf("empty preview wrote %q, warned %q", b.String(), w)
	}
	p := task.Preview{Files: []ledger.TaskFile{{File: "a.json"}, {File: "c.json"}}, Count: 2, Skipped: 1,
		Skips: []task.Skip{{At: 1, File: "b.json", MsgID: "m2"}}}
	if w := task.WritePreview(&b, req, p, true); w != "" {
		t.Errorf("warned %q", w)
	}
	want := "would replay a.json\nskip b.json: msg_id m2 already processed\nwould replay c.json\n"
	if b.String() != want {
		t.Errorf("wrote %q, want %q", b.String(), want)
	}
	b.Reset()
	task.WritePreview(&b, req, p, false)
	if b.String() != "skip b.json: msg_id m2 already processed\n" {
		t.Errorf("not dry: wrote %q", b.String())
	}
}

// TestPolicyMatches: the configuration's section agrees with the ledger's
// policy when either has none, or when they are the same.
func TestPolicyMatches(t *testing.T) {
	ten := task.Policy{Set: true, ReplayOver: 10, DiscardOver: -1}
	five := task.Policy{Set: true, ReplayOver: 5, DiscardOver: -1}
	for _, c := range []struct {
		ledger, conf task.Policy
		want         bool
	}{
		{task.NoPolicy, ten, true}, {ten, task.NoPolicy, true}, {ten, ten, true}, {ten, five, false},
	} {
		if got := (task.PolicyRecord{Policy: c.ledger}).Matches(c.conf); got != c.want {
			t.Errorf("ledger %s, conf %s: Matches %v, want %v", c.ledger.Settings(), c.conf.Settings(), got, c.want)
		}
	}
	var b bytes.Buffer
	task.WritePolicy(&b, task.PolicyRecord{Policy: task.NoPolicy}, ten, "/q/spool.conf")
	want := "replay_over=10 discard_over=none\nnot in the ledger yet: the approval section of /q/spool.conf, adopted by the next replay, discard or approve\n"
	if b.String() != want {
		t.Errorf("wrote %q, want %q", b.String(), want)
	}
}

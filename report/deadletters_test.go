package report

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

func dl(id int64, file string, reason spool.Reason) ledger.DeadLetterRecord {
	return ledger.DeadLetterRecord{ID: id, DeadLetter: ledger.DeadLetter{File: file, Reason: reason,
		At: time.Date(2025, 1, 1, 0, 0, int(id), 0, time.UTC)}}
}

func rp(id int64, file, newName string) ledger.ReplayRecord {
	return ledger.ReplayRecord{ID: id, Replay: ledger.Replay{File: file, NewName: newName, By: "op",
		At: time.Date(2025, 1, 1, 0, 1, int(id), 0, time.UTC)}}
}

func ids[T any](xs []T, id func(T) int64) []int64 {
	out := []int64{}
	for _, x := range xs {
		out = append(out, id(x))
	}
	return out
}

func TestLineage(t *testing.T) {
	for _, tt := range []struct {
		name        string
		file        string
		recs        []ledger.DeadLetterRecord
		reps        []ledger.ReplayRecord
		ok          bool
		cur         int64
		prev, repls []int64
	}{
		{name: "no record", file: "a.json"},
		{name: "latest record is another file's", file: "a.json",
			recs: []ledger.DeadLetterRecord{dl(1, "a.json", "parse"), dl(2, "b.json", "parse")}},
		{name: "first failure", file: "a.json", ok: true, cur: 1,
			recs: []ledger.DeadLetterRecord{dl(1, "a.json", "parse")}, prev: []int64{}, repls: []int64{}},
		{name: "replayed twice, renamed on the way", file: "a~2.json", ok: true, cur: 3,
			recs: []ledger.DeadLetterRecord{dl(1, "a.json", "missing-field"), dl(2, "a.json", "handler"), dl(3, "a~3.json", "handler")},
			reps: []ledger.ReplayRecord{rp(1, "a.json", "a.json"), rp(2, "a.json", "a~3.json")},
			prev: []int64{1, 2}, repls: []int64{1, 2}},
		{name: "reused inode: an unrelated earlier file does not join", file: "new.json", ok: true, cur: 2,
			recs: []ledger.DeadLetterRecord{dl(1, "old.json", "parse"), dl(2, "new.json", "parse")},
			reps: []ledger.ReplayRecord{rp(1, "old.json", "old.json")},
			prev: []int64{}, repls: []int64{}},
		{name: "replayed from a file without a record", file: "hand.json", ok: true, cur: 1,
			recs: []ledger.DeadLetterRecord{dl(1, "hand.json", "parse")},
			reps: []ledger.ReplayRecord{rp(1, "hand.json", "hand.json")},
			prev: []int64{}, repls: []int64{1}},
		{name: "each replay joins once", file: "a.json", ok: true, cur: 2,
			recs: []ledger.DeadLetterRecord{dl(1, "a.json", "parse"), dl(2, "a.json", "parse")},
			reps: []ledger.ReplayRecord{rp(1, "a.json", "a.json")},
			prev: []int64{1}, repls: []int64{1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cur, prev, repls, ok := lineage(tt.file, tt.recs, tt.reps)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			gotPrev := ids(prev, func(r ledger.DeadLetterRecord) int64 { return r.ID })
			gotRepls := ids(repls, func(r ledger.ReplayRecord) int64 { return r.ID })
			if cur.ID != tt.cur || !reflect.DeepEqual(gotPrev, tt.prev) || !reflect.DeepEqual(gotRepls, tt.repls) {
				t.Errorf("cur %d prev %v replays %v; want cur %d prev %v replays %v",
					cur.ID, gotPrev, gotRepls, tt.cur, tt.prev, tt.repls)
			}
		})
	}
}

func TestParseConsumer(t *testing.T) {
	for _, tt := range []struct {
		id   string
		host string
		pid  int
		ok   bool
	}{
		{"6b356c34ac26-10556@vm", "vm", 10556, true},
		{"abc-1@host-with-dashes.example", "host-with-dashes.example", 1, true},
		{"abc-x@vm", "", 0, false},
		{"abc-0@vm", "", 0, false},
		{"abc@vm", "", 0, false},
		{"test", "", 0, false},
		{"", "", 0, false},
	} {
		host, pid, ok := ParseConsumer(tt.id)
		if host != tt.host || pid != tt.pid || ok != tt.ok {
			t.Errorf("ParseConsumer(%q) = %q, %d, %v; want %q, %d, %v", tt.id, host, pid, ok, tt.host, tt.pid, tt.ok)
		}
	}
}

// richRows are three dead letters as Errors would return them: a handler
// failure replayed once after a first failure and stored under a suffixed
// name, a poison message, and a file without a record.
func richRows() []ErrorRow {
	t0 := time.Date(2025, 6, 11, 9, 0, 0, 0, time.UTC)
	return []ErrorRow{
		{
			File: "a~2.json", Reason: "handler", Detail: "order O1 is closed", At: t0.Add(time.Hour),
			Known: true, OriginalFile: "a.json", Ino: 7, MsgID: "m1", Attempts: 3,
			FirstFailure: t0.Add(time.Hour), LastFailure: t0.Add(2 * time.Hour), Consumer: "abc-42@host1",
			Previous: []ledger.DeadLetterRecord{{ID: 1, DeadLetter: ledger.DeadLetter{File: "a.json",
				Reason: "missing-field", Field: "amount", Detail: "required field is missing", At: t0}}},
			Replays: []ledger.ReplayRecord{{ID: 1, Replay: ledger.Replay{File: "a.json", NewName: "a.json",
				Ino: 7, By: "alice", Note: "amount added", At: t0.Add(30 * time.Minute)}}},
		},
		{
			File: "b.json", Reason: "missing-field", Field: "amount", Detail: "required field is missing",
			At: t0.Add(3 * time.Hour), Known: true, OriginalFile: "b.json", Ino: 8, Attempts: 1,
			FirstFailure: t0.Add(3 * time.Hour), LastFailure: t0.Add(3 * time.Hour), Consumer: "odd-consumer",
		},
		{File: "c.json", Reason: ReasonUnknown, Detail: "no dead-letter record in the ledger", Ino: 9},
	}
}

func TestWriteErrorsLong(t *testing.T) {
	var b bytes.Buffer
	if err := WriteErrorsLong(&b, richRows()); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"FILE      REASON         ATTEMPTS  FIRST FAILURE         LAST FAILURE          CONSUMER      ORIGINAL  REPLAYS  PREVIOUS  DETAIL\n" +
		"a~2.json  handler        3         2025-06-11T10:00:00Z  2025-06-11T11:00:00Z  host1:42      a.json    1        1         order O1 is closed\n" +
		"b.json    missing-field  1         2025-06-11T12:00:00Z  2025-06-11T12:00:00Z  odd-consumer  -         0        0         amount: required field is missing\n" +
		"c.json    unknown        -         -                     -                     -             -         0        0         no dead-letter record in the ledger\n"
	if got := b.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestWriteErrorsLongKeepsLinesWhole(t *testing.T) {
	rows := []ErrorRow{{File: "evil\n.json", Reason: "parse", Detail: strings.Repeat("é", 80) + "\nsecond line"}}
	var b bytes.Buffer
	if err := WriteErrorsLong(&b, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"evil\n.json"`) || !strings.HasSuffix(lines[1], "...") {
		t.Errorf("table:\n%s", b.String())
	}
	if !strings.Contains(lines[1], "é") || strings.ContainsRune(lines[1], '\uFFFD') {
		t.Errorf("detail clipped inside a character: %q", lines[1])
	}
}

func TestWriteErrorsJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteErrorsJSON(&b, richRows()); err != nil {
		t.Fatal(err)
	}
	want := `[
  {
    "file": "a~2.json",
    "original_file": "a.json",
    "reason": "handler",
    "field": null,
    "detail": "order O1 is closed",
    "msg_id": "m1",
    "attempts": 3,
    "first_failure": "2025-06-11T10:00:00.000000Z",
    "last_failure": "2025-06-11T11:00:00.000000Z",
    "at": "2025-06-11T10:00:00.000000Z",
    "consumer": "abc-42@host1",
    "consumer_host": "host1",
    "consumer_pid": 42,
    "ino": 7,
    "replays": 1,
    "previous_failures": 1,
    "history": [
      {
        "event": "dead-letter",
        "at": "2025-06-11T09:00:00.000000Z",
        "file": "a.json",
        "reason": "missing-field",
        "field": "amount",
        "detail": "required field is missing",
        "attempts": 1
      },
      {
        "event": "replay",
        "at": "2025-06-11T09:30:00.000000Z",
        "file": "a.json",
        "new_name": "a.json",
        "by": "alice",
        "note": "amount added"
      }
    ]
  },
  {
    "file": "b.json",
    "original_file": "b.json",
    "reason": "missing-field",
    "field": "amount",
    "detail": "required field is missing",
    "msg_id": null,
    "attempts": 1,
    "first_failure": "2025-06-11T12:00:00.000000Z",
    "last_failure": "2025-06-11T12:00:00.000000Z",
    "at": "2025-06-11T12:00:00.000000Z",
    "consumer": "odd-consumer",
    "consumer_host": null,
    "consumer_pid": null,
    "ino": 8,
    "replays": 0,
    "previous_failures": 0,
    "history": []
  },
  {
    "file": "c.json",
    "original_file": null,
    "reason": "unknown",
    "field": null,
    "detail": "no dead-letter record in the ledger",
    "msg_id": null,
    "attempts": 0,
    "first_failure": null,
    "last_failure": null,
    "at": null,
    "consumer": null,
    "consumer_host": null,
    "consumer_pid": null,
    "ino": 9,
    "replays": 0,
    "previous_failures": 0,
    "history": []
  }
]
`
	if got := b.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	b.Reset()
	if err := WriteErrorsJSON(&b, nil); err != nil || b.String() != "[]\n" {
		t.Errorf("no rows: %q, %v; want []", b.String(), err)
	}
}

func TestGroupByReason(t *testing.T) {
	t0 := time.Date(2025, 6, 11, 9, 0, 0, 0, time.UTC)
	row := func(reason string, first, last int) ErrorRow {
		r := ErrorRow{Reason: reason}
		if first >= 0 {
			r.FirstFailure, r.LastFailure = t0.Add(time.Duration(first)*time.Minute), t0.Add(time.Duration(last)*time.Minute)
		}
		return r
	}
	rows := []ErrorRow{
		row("parse", 5, 5), row("handler", 10, 20), row("unknown", -1, -1), row("handler", 1, 3),
		row("missing-field", 7, 7), row("parse", 2, 2), row("handler", 30, 40), row("unknown", -1, -1),
	}
	var b bytes.Buffer
	if err := WriteReasonGroupsCSV(&b, GroupByReason(rows)); err != nil {
		t.Fatal(err)
	}
	want := "reason,count,first,last\n" +
		"handler,3,2025-06-11T09:01:00.000000Z,2025-06-11T09:40:00.000000Z\n" +
		"parse,2,2025-06-11T09:02:00.000000Z,2025-06-11T09:05:00.000000Z\n" +
		"unknown,2,,\n" +
		"missing-field,1,2025-06-11T09:07:00.000000Z,2025-06-11T09:07:00.000000Z\n"
	if got := b.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestWriteConflictsAndReplays(t *testing.T) {
	at := time.Date(2025, 6, 11, 9, 0, 0, 500, time.UTC)
	var b bytes.Buffer
	if err := WriteConflictsCSV(&b, []ledger.Conflict{
		{MsgID: "m,1", ProcessedFile: "a.json", ProcessedHash: "aa", DuplicateFile: "b.json", DuplicateHash: "bb", At: at},
		{MsgID: "m2", DuplicateFile: "c.json", DuplicateHash: "cc", At: at},
	}); err != nil {
		t.Fatal(err)
	}
	want := "msg_id,processed_file,processed_hash,duplicate_file,duplicate_hash,at\n" +
		"\"m,1\",a.json,aa,b.json,bb,2025-06-11T09:00:00.000000Z\n" +
		"m2,,,c.json,cc,2025-06-11T09:00:00.000000Z\n"
	if got := b.String(); got != want {
		t.Errorf("conflicts got:\n%s\nwant:\n%s", got, want)
	}

	replays := []ledger.ReplayRecord{
		{ID: 1, Replay: ledger.Replay{File: "a.json", NewName: "a~2.json", Ino: 7, By: "alice", Note: "fixed\nupstream", At: at}},
		{ID: 2, Replay: ledger.Replay{File: "b.json", NewName: "b.json", By: "bob", At: at.Add(time.Hour)}},
	}
	b.Reset()
	if err := WriteReplaysCSV(&b, replays); err != nil {
		t.Fatal(err)
	}
	want = "at,file,new_name,by,note\n" +
		"2025-06-11T09:00:00.000000Z,a.json,a~2.json,alice,fixed upstream\n" +
		"2025-06-11T10:00:00.000000Z,b.json,b.json,bob,\n"
	if got := b.String(); got != want {
		t.Errorf("replays got:\n%s\nwant:\n%s", got, want)
	}
	b.Reset()
	if err := WriteReplaysJSON(&b, replays); err != nil {
		t.Fatal(err)
	}
	want = `[
  {
    "at": "2025-06-11T09:00:00.000000Z",
    "file": "a.json",
    "new_name": "a~2.json",
    "ino": 7,
    "by": "alice",
    "note": "fixed\nupstream"
  },
  {
    "at": "2025-06-11T10:00:00.000000Z",
    "file": "b.json",
    "new_name": "b.json",
    "ino": null,
    "by": "bob",
    "note": null
  }
]
`
	if got := b.String(); got != want {
		t.Errorf("replays JSON got:\n%s\nwant:\n%s", got, want)
	}
}

// drainWith consumes d's inbox with a handler that fails permanently for
// the msg_ids in fail, and succeeds for the others.
func drainWith(t *testing.T, d *queue.Dir, l *ledger.DB, fail ...string) spool.Stats {
	t.Helper()
	h := spool.HandlerFunc(func(_ context.Context, _ *sql.Tx, d *spool.Delivery) error {
		m := d.Message
		for _, id := range fail {
			if m.MsgID == id {
				return spool.Permanent(errors.New("order " + m.OrderNo + " is closed"))
			}
		}
		return nil
	})
	c, err := spool.NewConsumer(d, l.Consumer(), spool.Config{Handler: h, Retry: spool.Retry{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Drain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func body(id, order string, seq int) string {
	return fmt.Sprintf(`{"msg_id":%q,"order_no":%q,"seq":%d,"amount":"1.50"}`, id, order, seq)
}

// TestErrorsHistory: a message fails in its handler, is replayed and fails
// again; error/ holds it once, with both failures and the replay.
func TestErrorsHistory(t *testing.T) {
	d, l := setup(t)
	ctx := context.Background()
	put(t, d, queue.Inbox, "a.json", body("m1", "O1", 1))
	put(t, d, queue.Inbox, "b.json", `{"msg_id":"m2","order_no":"O2","seq":1}`)
	if st := drainWith(t, d, l, "m1"); st.DeadLetters != 2 {
		t.Fatalf("first drain: %+v, want 2 dead letters", st)
	}
	var inoA uint64
	if err := d.List(queue.Error, func(e queue.Entry) error {
		if e.Name == "a.json" {
			inoA = e.Ino
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.Stage(1, 0, "a.json", inoA); err != nil || !ok {
		t.Fatalf("stage a.json: %v, %v", ok, err)
	}
	newName, ok, err := d.Release(1, 0, "a.json")
	if err != nil || !ok {
		t.Fatalf("release a.json: %v, %v", ok, err)
	}
	if err := l.Replays().Record(ctx, ledger.Replay{File: "a.json", NewName: newName, Ino: inoA, By: "alice", Note: "retry"}); err != nil {
		t.Fatal(err)
	}
	if st := drainWith(t, d, l, "m1"); st.DeadLetters != 1 {
		t.Fatalf("second drain: %+v, want the replayed message dead again", st)
	}
	rows, err := Errors(ctx, d, l)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2: %+v", len(rows), rows)
	}
	a, b := rows[0], rows[1]
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	host = strings.NewReplacer("/", "_", "@", "_").Replace(host) // as a session names it
	gotHost, pid, ok := ParseConsumer(a.Consumer)
	if !ok || pid != os.Getpid() || gotHost != host {
		t.Errorf("consumer %q: want this process (pid %d on %s)", a.Consumer, os.Getpid(), host)
	}
	if a.File != "a.json" || a.Reason != "handler" || a.MsgID != "m1" || a.Attempts != 1 ||
		a.Detail != "order O1 is closed" || a.FirstFailure.IsZero() || !a.Known || a.OriginalFile != "a.json" {
		t.Errorf("a.json row = %+v", a)
	}
	if len(a.Previous) != 1 || len(a.Replays) != 1 || a.Previous[0].Reason != "handler" ||
		a.Replays[0].By != "alice" || a.Replays[0].Note != "retry" {
		t.Errorf("a.json history: previous %+v, replays %+v; want one of each", a.Previous, a.Replays)
	}
	if !a.Previous[0].At.Before(a.At) {
		t.Errorf("previous failure at %v is not before the current one at %v", a.Previous[0].At, a.At)
	}
	// A poison message: one attempt, at its inspection; its key, valid
	// though another field is missing, recorded.
	if b.Reason != "missing-field" || b.Field != "amount" || b.Attempts != 1 || b.MsgID != "m2" ||
		!b.FirstFailure.Equal(b.At) || !b.LastFailure.Equal(b.At) || len(b.Previous)+len(b.Replays) != 0 {
		t.Errorf("b.json row = %+v", b)
	}

	// The plan reads b's key from the file, knows a's from the ledger, and
	// sees neither processed; once m2 is sent again and processed, b's is.
	plan, err := ReplayPlan(ctx, d, l, spool.DefaultContract(), rows)
	if err != nil {
		t.Fatal(err)
	}
	if plan[0].Key != "m1" || plan[0].Processed || plan[1].Key != "m2" || plan[1].Processed {
		t.Errorf("plan = %+v / %+v", plan[0], plan[1])
	}
	put(t, d, queue.Inbox, "b-fixed.json", body("m2", "O2", 1))
	if st := drainWith(t, d, l); st.Processed != 1 {
		t.Fatalf("drain of the fix: %+v", st)
	}
	if plan, err = ReplayPlan(ctx, d, l, spool.DefaultContract(), rows); err != nil {
		t.Fatal(err)
	}
	if plan[0].Processed || !plan[1].Processed {
		t.Errorf("after m2 was processed: a %v, b %v; want only b processed", plan[0].Processed, plan[1].Processed)
	}
}

func TestReplayPlanWithoutKey(t *testing.T) {
	d, l := setup(t)
	put(t, d, queue.Error, "parse.json", `not json`)
	put(t, d, queue.Error, "dup-key.json", `{"msg_id":"a","msg_id":"b"}`)
	if err := os.Symlink("/etc/passwd", filepath.Join(d.StagePath(queue.Error), "link.json")); err != nil {
		t.Fatal(err)
	}
	put(t, d, queue.Error, "custom.json", `{"event_id":7}`)
	rows, err := Errors(context.Background(), d, l)
	if err != nil {
		t.Fatal(err)
	}
	c := spool.DefaultContract()
	c.KeyField = "event_id"
	plan, err := ReplayPlan(context.Background(), d, l, c, rows)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range plan {
		got[p.File] = p.Key
	}
	want := map[string]string{"custom.json": "7", "dup-key.json": "", "link.json": "", "parse.json": ""}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("keys = %v, want %v", got, want)
	}
}

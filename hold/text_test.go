package hold_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/spoolq/spool/hold"
	"github.com/spoolq/spool/ledger"
)

// TestUnmet checks that a msg_id held already counts as held as asked,
// and any other item not done does not.
func TestUnmet(t *testing.T) {
	r := hold.Result{Items: []hold.Item{
		{File: "a.json", Done: true},
		{MsgID: "m1", Why: hold.HeldAlready},
		{File: "b.json", Why: "not in inbox/"},
	}, Done: 1, Missing: 2}
	if n := r.Unmet(); n != 1 {
		t.Errorf("Unmet() = %d, want 1", n)
	}
}

// TestWriteText checks the text of what is held: the pause with who and
// why, each msg_id held, and a file without a record held all the same.
func TestWriteText(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	st := hold.State{
		Pause:  ledger.PauseState{Paused: true, Holder: ledger.Holder{By: "os:alice", Note: "deploy", At: at}},
		MsgIDs: []ledger.HeldID{{MsgID: "m1", Holder: ledger.Holder{By: "os:bob", At: at}}},
		Files:  []hold.File{{Name: "x.json"}},
	}
	var b bytes.Buffer
	if err := st.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "paused by os:alice since 2025-03-04T05:06:07Z: deploy\n" +
		"msg_ids held: 1\n  m1  by os:bob, 2025-03-04T05:06:07Z\n" +
		"files in held/: 1\n  FILE    WAS  MSG_ID  HELD BY  AT  WHY\n" +
		"  x.json  -    -       -        -   no record (a hold killed half-way, or moved here by hand): held all the same\n"
	if b.String() != want {
		t.Errorf("wrote:\n%s\nwant:\n%s", b.String(), want)
	}
}

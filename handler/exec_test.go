package handler

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
)

// TestExecEnvironment: the command gets the message on stdin and the
// delivery's SPOOL_* variables, its file name as the ledger stores it; a
// value the environment cannot carry is a permanent failure, nothing run.
func TestExecEnvironment(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	h := &Exec{
		Command: `{ cat; echo; for v in MSG_ID ORDER_NO SEQ AMOUNT FILE QUEUE; do eval "echo $v=\$SPOOL_$v"; done; } > ` + out,
		Timeout: 10 * time.Second,
		Queue:   "/q",
	}
	raw := `{"msg_id":"m1","order_no":"A","seq":3,"amount":"-1.50"}`
	d := &spool.Delivery{File: "caf\xe9.json", Message: &spool.Message{MsgID: "m1", OrderNo: "A", Seq: 3, Amount: "-1.50", Raw: []byte(raw)}}
	if err := h.Call(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := raw + "\nMSG_ID=m1\nORDER_NO=A\nSEQ=3\nAMOUNT=-1.50\nFILE=caf\uFFFD.json\nQUEUE=/q\n"
	if string(got) != want {
		t.Errorf("the command saw\n%s\nwant\n%s", got, want)
	}

	os.Remove(out)
	d.Message = &spool.Message{MsgID: "m\x001", Raw: []byte(`{}`)}
	if err := h.Call(context.Background(), d); !spool.IsPermanent(err) || !strings.Contains(err.Error(), "SPOOL_MSG_ID holds a NUL byte") {
		t.Errorf("msg_id with NUL: %v, want a permanent error naming SPOOL_MSG_ID", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the command ran for a msg_id it cannot be given: %v", err)
	}
}

// TestExecClassifies: exit 0 is success, ExitTempFail and a timeout are
// transient, any other exit status is permanent.
func TestExecClassifies(t *testing.T) {
	d := &spool.Delivery{File: "a.json", Message: &spool.Message{MsgID: "m1", Raw: []byte(`{}`)}}
	for _, tt := range []struct {
		command   string
		ok        bool
		permanent bool
		sub       string
	}{
		{command: "exit 0", ok: true},
		{command: "echo locked >&2; exit 75", sub: "exec: exit status 75 (temporary failure): locked"},
		{command: "echo closed >&2; exit 3", permanent: true, sub: "exec: exit status 3: closed"},
		{command: "sleep 5", sub: "exec: timed out after 200ms, process group killed"},
	} {
		err := (&Exec{Command: tt.command, Timeout: 200 * time.Millisecond}).Call(context.Background(), d)
		switch {
		case tt.ok && err != nil:
			t.Errorf("%q: %v, want success", tt.command, err)
		case tt.ok:
		case err == nil:
			t.Errorf("%q: success, want a failure", tt.command)
		case spool.IsPermanent(err) != tt.permanent || !strings.Contains(err.Error(), tt.sub):
			t.Errorf("%q: %v (permanent %v), want %q (permanent %v)", tt.command, err, spool.IsPermanent(err), tt.sub, tt.permanent)
		}
	}
}

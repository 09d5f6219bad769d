package handler_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/handler"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
)

// TestExecHoldsCallsLock: a run of an Exec in a consumer has the
// session's calls lock open on descriptor 3, which SPOOL_CALLS_LOCK
// names, and so has every process it starts: the lock a recovery probes
// to know that no process of the run is left.
func TestExecHoldsCallsLock(t *testing.T) {
	root := filepath.Join(t.TempDir(), "q")
	if err := queue.Init(root); err != nil {
		t.Fatal(err)
	}
	d, err := queue.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	l, err := sqlite.Open(context.Background(), filepath.Join(root, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if _, err := d.WriteFile(queue.Inbox, "m1.json", []byte(`{"msg_id":"m1","order_no":"A","seq":1,"amount":"1.00"}`)); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	h := &handler.Exec{
		Command: `echo "$SPOOL_CALLS_LOCK" > ` + out + `/var
readlink /proc/self/fd/$SPOOL_CALLS_LOCK > ` + out + `/shell
sh -c 'readlink /proc/self/fd/3' > ` + out + `/child`,
		Timeout: 10 * time.Second,
		Queue:   root,
	}
	var session string
	c, err := spool.NewConsumer(d, l.Consumer(), spool.Config{Caller: h, OnDelivery: func(dl *spool.Delivery, _ spool.Result, _ string) {
		session = dl.Consumer
	}})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.Drain(context.Background()); err != nil || st.Processed != 1 {
		t.Fatalf("Drain = %+v, %v; want the message processed", st, err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := read("var"); got != "3" {
		t.Errorf("SPOOL_CALLS_LOCK=%q, want 3", got)
	}
	want := filepath.Join(root, queue.CallsLockDir, session)
	for _, who := range []string{"shell", "child"} {
		if got := read(who); got != want {
			t.Errorf("the run's %s has %q on descriptor 3, want the calls lock %s", who, got, want)
		}
	}
	if _, err := os.Stat(want); !os.IsNotExist(err) {
		t.Errorf("the calls lock of a session closed clean is left: %v", err)
	}
}

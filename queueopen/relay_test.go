package queueopen_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/queueopen"
)

// TestRelayDir: Relay gives a dir:// target its own queue's contract
// from that queue's spool.conf: one that would dead-letter the events is
// refused before anything is sent, and with it gone the events arrive in
// the receiving inbox/, once each.
func TestRelayDir(t *testing.T) {
	ctx := context.Background()
	src, dst := newQueue(t), newQueue(t)
	for _, dir := range []string{src, dst} {
		if _, err := queueopen.Init(ctx, dir, queueopen.Options{Use: queueopen.Write}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := queueopen.OpenLedger(ctx, src, queueopen.Options{Use: queueopen.Write})
	if err != nil {
		t.Fatal(err)
	}
	for _, agg := range []string{"a1", "a1", "a2"} {
		if _, err := l.SQL().Exec(`INSERT INTO outbox (aggregate, type, payload) VALUES (?, 'payment', '{"amount":"1.50"}')`, agg); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dst, queueopen.ConfigName)
	if err := os.WriteFile(conf, []byte(`{"required": ["msg_id", "customer"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var warned []string
	o := queueopen.RelayOptions{To: "dir://" + dst, Warn: func(line string) { warned = append(warned, line) }}
	st, err := queueopen.Relay(ctx, src, queueopen.Options{}, o)
	if err == nil || !strings.Contains(err.Error(), `"customer"`) || st != nil {
		t.Fatalf("a contract that requires a field the events lack: %v, stats %v; want a refusal naming it, no stats", err, st)
	}
	if n := inboxLen(t, dst); n != 0 {
		t.Fatalf("refused, yet %d files in the receiving inbox/", n)
	}
	if err := os.Remove(conf); err != nil {
		t.Fatal(err)
	}
	st, err = queueopen.Relay(ctx, src, queueopen.Options{}, o)
	if err != nil || st == nil || st.Published != 3 || st.Failed != 0 || len(warned) != 0 {
		t.Fatalf("Relay: %v, stats %+v, warnings %q; want 3 published, none failed", err, st, warned)
	}
	if n := inboxLen(t, dst); n != 3 {
		t.Fatalf("%d files in the receiving inbox/, want 3", n)
	}
	if st, err = queueopen.Relay(ctx, src, queueopen.Options{}, o); err != nil || st.Published != 0 {
		t.Fatalf("again: %v, stats %+v; want nothing left to publish", err, st)
	}
	if n, err := queueopen.Unpark(ctx, src, queueopen.Options{}, ""); err != nil || n != 0 {
		t.Fatalf("Unpark: %d, %v; want 0 parked rows", n, err)
	}
}

// inboxLen counts the files in the inbox/ of the queue at dir.
func inboxLen(t *testing.T, dir string) int {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dir, "inbox"))
	if err != nil {
		t.Fatal(err)
	}
	return len(des)
}

package queueopen_test

import (
	"context"
	"strings"
	"testing"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queueopen"
)

// TestFlushAudited: a flush of msg_ids that wait for no retry flushes
// none, names them missing (a finding, no error), and its audit row
// ends ok with the counts.
func TestFlushAudited(t *testing.T) {
	ctx := context.Background()
	dir := newQueue(t)
	if _, err := queueopen.Init(ctx, dir, queueopen.Options{Use: queueopen.Write}); err != nil {
		t.Fatal(err)
	}
	var flushed, missing []string
	called := false
	a := queueopen.Audited{Who: ledger.AuditEntry{Actor: "os:ann", Via: ledger.AuditCLI}, By: "test"}
	err := queueopen.Flush(ctx, dir, queueopen.Options{}, a, []string{"m1", "m2"}, func(f, m []string) {
		called, flushed, missing = true, f, m
	})
	if err != nil || !called || len(flushed) != 0 || strings.Join(missing, ",") != "m1,m2" {
		t.Fatalf("Flush: %v, called %v, flushed %q, missing %q; want m1 and m2 missing", err, called, flushed, missing)
	}
	l, err := queueopen.OpenLedger(ctx, dir, queueopen.Options{Use: queueopen.Read})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rows, err := l.Audit().List(ctx, ledger.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range rows {
		if r.Action == queueopen.AuditFlush {
			found = true
			if r.Outcome != ledger.AuditOK || r.Selection != `{"msg_ids":["m1","m2"]}` || r.Counts["missing"] != 2 || r.Counts["done"] != 0 {
				t.Errorf("row %+v: want ok, the msg_ids, 2 missing", r)
			}
		}
	}
	if !found {
		t.Error("no flush row in the audit")
	}
}

package queueopen_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/task"
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

// TestRunAudited: an action runs between its row's start and end, and
// the row keeps its selection, the counts it set and how it ended; on a
// ledger where the row cannot be written (opened read-only) the action
// does not run at all.
func TestRunAudited(t *testing.T) {
	ctx := context.Background()
	dir := newQueue(t)
	if _, err := queueopen.Init(ctx, dir, queueopen.Options{Use: queueopen.Write}); err != nil {
		t.Fatal(err)
	}
	a := queueopen.Audited{Who: ledger.AuditEntry{Actor: "os:ann", Via: ledger.AuditCLI}, By: "test"}
	ro, err := queueopen.OpenLedger(ctx, dir, queueopen.Options{Use: queueopen.Read, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	err = queueopen.RunAudited(ctx, ro, a, "copy", nil, func(*task.Action) error { ran = true; return nil })
	if cerr := ro.Close(); cerr != nil {
		t.Fatal(cerr)
	}
	if err == nil || ran {
		t.Fatalf("on a read-only ledger: %v, ran %v; want an error and the action not run", err, ran)
	}
	l, err := queueopen.OpenLedger(ctx, dir, queueopen.Options{Use: queueopen.Write})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	failed := errors.New("disk on fire")
	err = queueopen.RunAudited(ctx, l, a, "copy", map[string]any{"to": "/x"}, func(run *task.Action) error {
		run.Counts["bytes"] = 42
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("RunAudited: %v, want the action's error", err)
	}
	rows, err := l.Audit().List(ctx, ledger.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range rows {
		if r.Action == "copy" {
			found = true
			if r.Outcome != ledger.AuditFailed || r.Selection != `{"to":"/x"}` || r.Counts["bytes"] != 42 || !strings.Contains(r.Detail, "disk on fire") {
				t.Errorf("row %+v: want failed, the selection, 42 bytes, the error", r)
			}
		}
	}
	if !found {
		t.Error("no row of the action in the audit")
	}
}

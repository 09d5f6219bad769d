package ledgertest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
)

// testApprovalPolicy: a new ledger holds no approval policy; the first
// Tasks.SetApprovalPolicy (from none) writes it with its audit row in one
// transaction; a change from a policy that is no longer the ledger's, or
// a second first setting, fails with ErrPolicyChanged and writes nothing,
// no audit row either; of several processes adopting at once exactly one
// wins.
func testApprovalPolicy(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	if _, ok, err := db.Tasks().ApprovalPolicy(ctx); err != nil || ok {
		t.Fatalf("ApprovalPolicy of a new ledger = %v, %v; want none", ok, err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456000, time.UTC)
	first := ledger.ApprovalPolicy{ReplayOver: 100, DiscardOver: -1, SetBy: "os:alice", SetAt: at, Source: ledger.PolicyFromConfig}
	entry := ledger.AuditEntry{Actor: "os:alice", Via: ledger.AuditCLI, Action: "policy", Selection: `{"replay_over":100}`}
	if err := db.Tasks().SetApprovalPolicy(ctx, nil, first, entry, "adopted"); err != nil {
		t.Fatal(err)
	}
	got, ok, err := db.Tasks().ApprovalPolicy(ctx)
	if err != nil || !ok || got.ReplayOver != 100 || got.DiscardOver != -1 || got.SetBy != "os:alice" || !got.SetAt.Equal(at) || got.Source != "spool.conf" {
		t.Fatalf("ApprovalPolicy = %+v, %v, %v; want %+v", got, ok, err, first)
	}
	if err := db.Tasks().SetApprovalPolicy(ctx, nil, first, entry, "adopted again"); !errors.Is(err, ledger.ErrPolicyChanged) {
		t.Errorf("a second first setting: %v, want ErrPolicyChanged", err)
	}
	stale := got
	stale.SetAt = at.Add(-time.Hour)
	next := ledger.ApprovalPolicy{ReplayOver: 5, DiscardOver: 0, SetBy: "os:bob", Source: ledger.PolicySet}
	if err := db.Tasks().SetApprovalPolicy(ctx, &stale, next, entry, "stale"); !errors.Is(err, ledger.ErrPolicyChanged) {
		t.Errorf("a change from a stale policy: %v, want ErrPolicyChanged", err)
	}
	if err := db.Tasks().SetApprovalPolicy(ctx, &got, ledger.ApprovalPolicy{ReplayOver: -2, SetBy: "x"}, entry, ""); err == nil {
		t.Error("a limit of -2: nil error")
	}
	if err := db.Tasks().SetApprovalPolicy(ctx, &got, next, ledger.AuditEntry{Actor: "os:bob", Via: ledger.AuditCLI, Action: "policy"}, "100 -> 5"); err != nil {
		t.Fatal(err)
	}
	now, ok, err := db.Tasks().ApprovalPolicy(ctx)
	if err != nil || !ok || now.ReplayOver != 5 || now.DiscardOver != 0 || now.SetBy != "os:bob" || now.Source != "set" || now.SetAt.IsZero() {
		t.Fatalf("ApprovalPolicy after a change = %+v, %v, %v", now, ok, err)
	}
	rows, err := db.Audit().List(ctx, ledger.AuditQuery{})
	if err != nil || len(rows) != 2 {
		t.Fatalf("audit rows = %+v, %v; want one per change, 2", rows, err)
	}
	if r := rows[0]; r.Actor != "os:alice" || r.Outcome != ledger.AuditOK || r.Detail != "adopted" || !r.At.Equal(at) || r.Ended.IsZero() {
		t.Errorf("first row = %+v", r)
	}
	if r := rows[1]; r.Actor != "os:bob" || r.Detail != "100 -> 5" {
		t.Errorf("second row = %+v", r)
	}

	// Several adopt at once on a fresh table: one wins, the others find the
	// policy changed; one audit row in all.
	if _, err := db.SQL().ExecContext(ctx, `DELETE FROM spool_approval_policy`); err != nil {
		t.Fatal(err)
	}
	var (
		wg          sync.WaitGroup
		mu          sync.Mutex
		won, raced  int
		unexpected  []error
		beforeRows  = len(rows)
		competitors = 4
	)
	for range competitors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := db.Tasks().SetApprovalPolicy(ctx, nil, first, entry, "adopted")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, ledger.ErrPolicyChanged):
				raced++
			default:
				unexpected = append(unexpected, err)
			}
		}()
	}
	wg.Wait()
	if won != 1 || raced != competitors-1 || len(unexpected) > 0 {
		t.Errorf("concurrent adoption: %d won, %d found it changed, errors %v; want 1 and %d", won, raced, unexpected, competitors-1)
	}
	if rows, err := db.Audit().List(ctx, ledger.AuditQuery{}); err != nil || len(rows) != beforeRows+1 {
		t.Errorf("audit rows after the concurrent adoption: %d, %v; want %d", len(rows), err, beforeRows+1)
	}
}

package ledgertest

import (
	"maps"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
)

// testAuditSpan: AuditLog.RecordSpan writes one closed row from its entry's
// At to the end it is given, with its counts, as AuditLog.List gives it back;
// an end before the beginning and an unknown outcome are refused and
// write nothing.
func testAuditSpan(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	from := time.Date(2026, 3, 1, 10, 0, 0, 250000000, time.UTC)
	to := from.Add(59*time.Second + 500*time.Millisecond)
	e := ledger.AuditEntry{At: from, Actor: "-", Via: ledger.AuditHTTP, Action: "login",
		Selection: `{"client":"192.0.2.7"}`, Host: "h1", PID: 7}
	counts := ledger.AuditCounts{"refused": 4999}
	id, err := db.Audit().RecordSpan(ctx, e, ledger.AuditRefused, counts, "refused 4999 times more", to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Audit().RecordSpan(ctx, e, ledger.AuditRefused, counts, "", from.Add(-time.Second)); err == nil {
		t.Error("Audit().RecordSpan ending before it begins: nil error")
	}
	if _, err := db.Audit().RecordSpan(ctx, e, ledger.AuditStarted, counts, "", to); err == nil {
		t.Error("Audit().RecordSpan with outcome started: nil error")
	}
	rows, err := db.Audit().List(ctx, ledger.AuditQuery{})
	if err != nil || len(rows) != 1 {
		t.Fatalf("Audit().List = %v, %v; want the one row", rows, err)
	}
	r := rows[0]
	if r.ID != id || r.Outcome != ledger.AuditRefused || !r.At.Equal(from) || !r.Ended.Equal(to) ||
		!maps.Equal(r.Counts, counts) || r.Selection != e.Selection || r.Detail != "refused 4999 times more" {
		t.Errorf("span row = %+v, want %+v from %v to %v with %v", r, e, from, to, counts)
	}
}

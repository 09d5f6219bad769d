package ledger

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// RecordSpan writes one closed row, as AuditLog.Record does, that stands
// for what happened many times from e.At to ended: refusals folded into
// one row with their number in counts (the console writes a client's
// repeated refusals so, one row a minute, so that a flood of them cannot
// grow the audit without bound). The row's At is e.At (zero for now) and
// its Ended is ended, which must not be before it; outcome is one of
// AuditOK, AuditFailed, AuditInterrupted, AuditRefused.
func (a AuditLog) RecordSpan(ctx context.Context, e AuditEntry, outcome string, counts AuditCounts, detail string, ended time.Time) (int64, error) {
	if !slices.Contains(auditOutcomes, outcome) {
		return 0, fmt.Errorf("record audit span: outcome %q: want one of %s", outcome, strings.Join(auditOutcomes, ", "))
	}
	e.At = e.at()
	if ended.Before(e.At) {
		return 0, fmt.Errorf("record audit span: ends at %s, before it begins at %s", ended.UTC().Format(TimeLayout), e.At.UTC().Format(TimeLayout))
	}
	return a.db.auditInsert(ctx, "record audit span", e, outcome, counts, detail, ended)
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/replay"
)

// discardAudit is the audit row of one spool discard (ledger.AuditBegin):
// written as started before the first change, closed with its outcome
// and counts after.
type discardAudit struct {
	l     *ledger.DB
	entry ledger.AuditEntry
}

// newDiscardAudit describes a discard of sel by who, with its note and
// --to directory, as the audit keeps it.
func newDiscardAudit(l *ledger.DB, who string, sel replay.Selection, note, to string) (*discardAudit, error) {
	s := map[string]any{"note": note}
	switch {
	case len(sel.Names) > 0:
		s["names"] = sel.Names
	case sel.All:
		s["all"] = true
	default:
		s["reason"] = sel.Reason
	}
	if to != "" {
		s["to"] = to
	}
	text, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("audit discard: %w", err)
	}
	host, _ := os.Hostname() // empty when unknown, as AuditEntry allows
	return &discardAudit{l: l, entry: ledger.AuditEntry{Actor: who, Via: ledger.AuditCLI, Action: "discard",
		Selection: string(text), Host: host, PID: os.Getpid()}}, nil
}

// begin commits the started row; the discard must not go on without it.
func (a *discardAudit) begin(ctx context.Context) (int64, error) {
	id, err := a.l.AuditBegin(ctx, a.entry)
	if err != nil {
		return 0, fmt.Errorf("audit discard: %w", err)
	}
	return id, nil
}

// end closes row id with the outcome of the batch b and err.
func (a *discardAudit) end(ctx context.Context, id int64, selected int, b ledger.DiscardBatch, err error) error {
	counts := ledger.AuditCounts{"selected": int64(selected)}
	for _, it := range b.Items {
		switch it.Outcome {
		case ledger.DiscardDeleted, ledger.DiscardMoved:
			counts["done"]++
		case ledger.DiscardMissing:
			counts["missing"]++
		}
	}
	outcome, detail := ledger.AuditOK, ""
	if b.ID != 0 {
		detail = fmt.Sprintf("discard %d", b.ID)
	}
	if err != nil {
		outcome, detail = ledger.AuditFailed, err.Error()
	}
	if aerr := a.l.AuditEnd(ctx, id, outcome, counts, detail); aerr != nil {
		return errors.Join(err, fmt.Errorf("audit discard: %w", aerr))
	}
	return err
}

// refused records a discard refused before it changed anything.
func (a *discardAudit) refused(ctx context.Context, err error) error {
	if _, aerr := a.l.AuditRecord(ctx, a.entry, ledger.AuditRefused, nil, err.Error()); aerr != nil {
		return errors.Join(err, fmt.Errorf("audit discard: %w", aerr))
	}
	return err
}

// beginResume commits the started row of the finishing of the discards
// a killed run left (batches), before the first of them is touched: the
// actor is the finisher, the selection names the batches.
func (a *discardAudit) beginResume(ctx context.Context, batches []ledger.DiscardBatch) (int64, error) {
	ids := make([]int64, len(batches))
	for i, b := range batches {
		ids[i] = b.ID
	}
	text, err := json.Marshal(map[string]any{"finish": ids})
	if err != nil {
		return 0, fmt.Errorf("audit discard: %w", err)
	}
	e := a.entry
	e.Selection = string(text)
	id, err := a.l.AuditBegin(ctx, e)
	if err != nil {
		return 0, fmt.Errorf("audit discard: %w", err)
	}
	return id, nil
}

// endResume closes row id of beginResume with what was finished and err.
func (a *discardAudit) endResume(ctx context.Context, id int64, finished []ledger.DiscardBatch, err error) error {
	counts := ledger.AuditCounts{"batches": int64(len(finished))}
	for _, b := range finished {
		for _, it := range b.Items {
			if it.Outcome == ledger.DiscardMissing {
				counts["missing"]++
			} else {
				counts["done"]++
			}
		}
	}
	outcome, detail := ledger.AuditOK, fmt.Sprintf("finished %d discards interrupted before", len(finished))
	if err != nil {
		outcome, detail = ledger.AuditFailed, err.Error()
	}
	if aerr := a.l.AuditEnd(ctx, id, outcome, counts, detail); aerr != nil {
		return errors.Join(err, fmt.Errorf("audit discard: %w", aerr))
	}
	return err
}

package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The approval policy of the queue lives in its ledger (table
// spool_approval_policy, one row while there is one), so that four eyes
// does not depend on a file a member of the queue's group may move aside
// (package task, docs/DESIGN.md, "Tasks"). It changes only by
// Tasks.SetApprovalPolicy, which writes its audit row in the same transaction.

// ApprovalPolicy is the approval policy a ledger holds.
type ApprovalPolicy struct {
	// ReplayOver and DiscardOver are the most files a replay, a discard,
	// may select without a second person's approval; -1 for no limit.
	ReplayOver, DiscardOver int
	// SetBy is who set it (an audit actor), SetAt when, and Source how
	// (PolicyFromConfig, PolicySet).
	SetBy  string
	SetAt  time.Time
	Source string
}

// Sources of an ApprovalPolicy.
const (
	// PolicyFromConfig: adopted from the queue's configuration file the
	// first time the ledger saw one with an approval section.
	PolicyFromConfig = "spool.conf"
	// PolicySet: set by an approver (spool policy set).
	PolicySet = "set"
)

// ErrPolicyChanged is returned by Tasks.SetApprovalPolicy when the ledger's
// policy is no longer the one the change was computed from: another
// process set it meanwhile. Nothing was written.
var ErrPolicyChanged = errors.New("the approval policy changed meanwhile")

// ApprovalPolicy returns the ledger's approval policy, and false when it
// holds none (the queue has never had one).
func (ts Tasks) ApprovalPolicy(ctx context.Context) (ApprovalPolicy, bool, error) {
	if err := ts.db.open(); err != nil {
		return ApprovalPolicy{}, false, err
	}
	var (
		p      ApprovalPolicy
		ro, do int64
		at     string
	)
	err := ts.db.sql.QueryRowContext(ctx, `SELECT replay_over, discard_over, set_by, set_at, source FROM spool_approval_policy WHERE id = 1`).
		Scan(&ro, &do, &p.SetBy, &at, &p.Source)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ApprovalPolicy{}, false, nil
	case err != nil:
		return ApprovalPolicy{}, false, ts.db.fail("read approval policy", err)
	}
	p.ReplayOver, p.DiscardOver = int(ro), int(do)
	if p.SetAt, err = parseTime("spool_approval_policy.set_at", at); err != nil {
		return ApprovalPolicy{}, false, fmt.Errorf("read approval policy: %w", err)
	}
	return p, true, nil
}

// SetApprovalPolicy makes p the ledger's approval policy, provided the
// ledger's is still old (nil: it holds none yet), and writes the audit
// row e, closed ok with detail, in the same transaction: a policy is
// never changed unaudited, and an audit row never tells of a change that
// did not happen. p.SetAt zero is now; p.SetBy is required. When the
// ledger's policy is not old (another process set it meanwhile) it fails
// with ErrPolicyChanged and writes nothing.
func (ts Tasks) SetApprovalPolicy(ctx context.Context, old *ApprovalPolicy, p ApprovalPolicy, e AuditEntry, detail string) error {
	if err := ts.db.open(); err != nil {
		return err
	}
	switch {
	case p.SetBy == "":
		return errors.New("set approval policy: set_by is required")
	case p.ReplayOver < -1 || p.DiscardOver < -1:
		return fmt.Errorf("set approval policy: limits %d and %d: want -1 (none) or more", p.ReplayOver, p.DiscardOver)
	}
	if err := checkAuditEntry(e); err != nil {
		return fmt.Errorf("set approval policy: audit: %w", err)
	}
	if p.SetAt.IsZero() {
		p.SetAt = time.Now()
	}
	at := formatTime(p.SetAt)
	err := ts.db.inTx(ctx, func(tx *sql.Tx) error {
		var res sql.Result
		var err error
		if old == nil {
			res, err = tx.ExecContext(ctx, ts.db.dialect.Rebind(ts.db.dialect.InsertNew(`INSERT INTO spool_approval_policy
    (id, replay_over, discard_over, set_by, set_at, source) VALUES (1, ?, ?, ?, ?, ?)`, "id", "")),
				p.ReplayOver, p.DiscardOver, clean(p.SetBy), at, clean(p.Source))
		} else {
			// set_at tells two settings of the same values apart.
			res, err = tx.ExecContext(ctx, ts.db.dialect.Rebind(`UPDATE spool_approval_policy
SET replay_over = ?, discard_over = ?, set_by = ?, set_at = ?, source = ?
WHERE id = 1 AND replay_over = ? AND discard_over = ? AND set_at = ?`),
				p.ReplayOver, p.DiscardOver, clean(p.SetBy), at, clean(p.Source), old.ReplayOver, old.DiscardOver, formatTime(old.SetAt))
		}
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return ErrPolicyChanged
		}
		e.At = p.SetAt
		_, err = ts.db.auditInsertTx(ctx, tx, e, AuditOK, "{}", detail, at)
		return err
	})
	if errors.Is(err, ErrPolicyChanged) {
		return fmt.Errorf("set approval policy: %w", err)
	}
	if err != nil {
		return ts.db.fail("set approval policy", err)
	}
	return nil
}

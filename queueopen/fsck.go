package queueopen

import (
	"context"
	"errors"
	"fmt"

	"github.com/spoolq/spool/fsck"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/task"
)

// AuditRepair is the audit action of a repair.
const AuditRepair = "repair"

// FsckOptions are one check of a queue against its ledger (Fsck).
type FsckOptions struct {
	// Override changes the contract spool.conf gives (LoadContract).
	Override Override
	// Repair repairs what can be repaired without guessing
	// (fsck.Repair), an audited action; false checks alone (fsck.Check).
	Repair bool
	// Log is told each repair, a line (fsck.Options.Log).
	Log func(line string)
	// Audited is who repairs, for the audit row.
	Audited
}

// Fsck checks (or repairs) the queue at dir against its ledger (o.DB;
// o.Audit for a repair's first bind), as
// spool fsck does: the contract read strictly; a missing SQLite ledger,
// when not repairing, is a report of its own (fsck.MissingLedger) rather
// than an error; the ledger opened without checking that it is the
// queue's (OpenLedger: that is what fsck reports and repairs), for
// writing only to repair; a database that holds no ledger is a
// *RefusalError naming it, and a bad queue.id one that says what to run
// (BadIDError). A repair is audited once it begins to change anything
// (fsck.Options.Begin), its row ending with the counts repairs (one a
// line logged) and problems (those left). Other refusals of the ledger
// are OpenLedger's.
func Fsck(ctx context.Context, dir string, o Options, f FsckOptions) (r *fsck.Report, err error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer CloseDir(d, &err)
	contract, _, err := LoadContract(dir, f.Override)
	if err != nil {
		return nil, err
	}
	if path, ok := SQLiteFile(d.Path(), o.DB); ok && !f.Repair {
		if r := fsck.MissingLedger(d, path, o.DB != "", FsckLine(d.Path(), o.DB)); r != nil {
			return r, nil
		}
	}
	o.Use = Read
	if f.Repair {
		o.Use = Write
	}
	l, err := OpenLedger(ctx, dir, o)
	if err != nil {
		if errors.Is(err, ledger.ErrNoLedger) {
			return nil, Refuse(err, "%s holds no spool ledger (is --db right?)", LedgerName(dir, o.DB))
		}
		return nil, err
	}
	defer func() {
		if cerr := l.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close ledger: %w", cerr)
		}
	}()
	fo := fsck.Options{Contract: contract, Log: f.Log}
	if f.Repair {
		r, err = f.repair(ctx, d, l, fo)
	} else {
		r, err = fsck.Check(ctx, d, l, fo)
	}
	if errors.Is(err, queue.ErrBadID) {
		return r, BadIDError(err, dir, o.DB)
	}
	return r, err
}

// repair is fsck.Repair, audited: counts repairs (one per line it logs)
// and problems (those left after it); refused before any change, it
// writes no row.
func (f FsckOptions) repair(ctx context.Context, d *queue.Dir, l *ledger.DB, o fsck.Options) (r *fsck.Report, err error) {
	var run *task.Action
	o.Begin = func(ctx context.Context) error {
		var err error
		run, err = f.begin(ctx, l, AuditRepair, nil)
		return err
	}
	repairs := int64(0)
	log := o.Log
	o.Log = func(line string) {
		repairs++
		if log != nil {
			log(line)
		}
	}
	r, err = fsck.Repair(ctx, d, l, o)
	if run == nil {
		return r, err // refused before any change: nothing to audit
	}
	run.Counts["repairs"] = repairs
	if r != nil {
		run.Counts["problems"] = int64(r.Problems())
	}
	return r, f.end(ctx, run, err)
}

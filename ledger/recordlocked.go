package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/spoolq/spool"
)

// insertProcessedLocked is insertProcessedRows and markConflicts in one
// lookup, for a transaction that holds the database's write lock from its
// BEGIN (SQLite's BEGIN IMMEDIATE): no other writer can insert a msg_id
// between the lookup and the insert. It looks up the processed rows of the
// batch's candidates first (their owners, for the duplicates'
// comparison), then inserts the others without RETURNING, which on SQLite
// fills and reads back a scratch table of every row inserted: the
// duplicates are a tenth of a drain, the rows inserted the rest. The
// PRIMARY KEY still decides (I2): the INSERT skips a msg_id already there,
// and one fewer row inserted than the lookup left fails the transaction
// instead of recording a duplicate as processed.
func (db *DB) insertProcessedLocked(ctx context.Context, tx *sql.Tx, batch []*spool.Delivery, res []result, now time.Time) error {
	candidates, first := firstOfEach(batch, res)
	if len(candidates) == 0 {
		return nil
	}
	ids := make([]any, len(candidates))
	for j, i := range candidates {
		ids[j] = batch[i].Message.MsgID
	}
	owners, err := db.owners(ctx, tx, ids)
	if err != nil {
		return fmt.Errorf("look up processed: %w", err)
	}
	args := make([]any, 0, (len(candidates)-len(owners))*processedColumns)
	stamp := formatTime(now)
	for _, i := range candidates {
		d := batch[i]
		if _, ok := owners[d.Message.MsgID]; ok {
			res[i].outcome = spool.OutcomeDuplicate
			continue
		}
		res[i].outcome = spool.OutcomeProcessed
		args = appendProcessed(args, d, stamp)
	}
	want := int64(len(args) / processedColumns)
	got, err := db.insProcessedLocked.count(ctx, tx, args)
	if err != nil {
		return fmt.Errorf("insert processed: %w", err)
	}
	if got != want {
		return fmt.Errorf("insert processed: %d rows inserted of %d not in processed when looked up", got, want)
	}
	// The later deliveries of a msg_id whose first went in now compare
	// with it, as the owners' lookup after the insert finds it.
	for id, i := range first {
		if res[i].outcome == spool.OutcomeProcessed {
			owners[id] = owner{hash: contentHash(batch[i]), claim: batch[i].Claim}
		}
	}
	return compareOwners(batch, res, owners)
}

// count is exec returning how many rows the statements changed.
func (m *multiRow) count(ctx context.Context, tx *sql.Tx, args []any) (int64, error) {
	var n int64
	err := m.split(args, func(st *sql.Stmt, piece []any) error {
		r, err := tx.StmtContext(ctx, st).ExecContext(ctx, piece...)
		if err != nil {
			return err
		}
		k, err := r.RowsAffected()
		n += k
		return err
	})
	return n, err
}

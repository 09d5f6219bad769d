package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/internal/sample"
	"github.com/spoolq/spool/ledger/sqlite"
)

// Shape of the ledger floor's writes: a batch file's records are committed
// DefaultRecordBatchSize a transaction, and the ledger's multi-row INSERTs
// carry at most 128 rows.
const (
	floorLedgerTx   = spool.DefaultRecordBatchSize
	floorLedgerRows = 128
)

// floorLedgerColumns are the processed columns a record's row fills in
// spool's ledger (the others stay NULL for a generated record).
var floorLedgerColumns = []string{"msg_id", "order_no", "seq", "amount", "processed_at", "file", "content_hash", "payload", "claim", "ino"}

// floorLedger is the least a batch file's records cost in the SQLite
// ledger: n generated records' processed rows inserted into a fresh
// ledger of spool's schema and durability through database/sql, as
// multi-row INSERTs of 128 rows, 1024 rows a transaction. The records are
// parsed and their rows and content hashes built between the metered
// commits; a redelivery is skipped by the PRIMARY KEY (ON CONFLICT DO
// NOTHING) with no lookup and no deliveries row, and a poison record is
// not written. No file is read, nothing is decided or fsynced but the
// commits: a drain of batch files that keeps each record's processed row
// in this SQLite, through database/sql, is not faster on this machine,
// whatever it does around its ledger.
func floorLedger(ctx context.Context, dir string, n int, gen sample.Options, relaxed bool, sc *syscallCounter) (run Run, err error) {
	run = Run{Name: "floor (ledger)"}
	db, err := sqlite.OpenWith(ctx, filepath.Join(dir, "ledger.db"), sqlite.Options{Relaxed: relaxed})
	if err != nil {
		return run, fmt.Errorf("floor (ledger): %w", err)
	}
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("floor (ledger): %w", cerr)
		}
	}()
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(floorLedgerColumns)), ", ") + ")"
	text := func(k int) string {
		return "INSERT INTO processed (" + strings.Join(floorLedgerColumns, ", ") + ") VALUES " +
			strings.TrimSuffix(strings.Repeat(row+", ", k), ", ") + " ON CONFLICT DO NOTHING"
	}
	full, err := db.SQL().PrepareContext(ctx, text(floorLedgerRows))
	if err != nil {
		return run, fmt.Errorf("floor (ledger): %w", err)
	}
	defer full.Close()
	// commit writes one transaction's rows, whole statements of the
	// prepared form, the last one of any size prepared on the spot. Only
	// the commits are metered: the rows are built between them, so that
	// neither their building nor a whole file's rows held in memory (the
	// process's peak RSS is spool's figure) weigh on the floor.
	commit := func(rows [][]any) error {
		m, err := startMeter(sc)
		if err != nil {
			return err
		}
		tx, err := db.SQL().BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		for len(rows) > 0 {
			k := min(len(rows), floorLedgerRows)
			args := make([]any, 0, k*len(floorLedgerColumns))
			for _, r := range rows[:k] {
				args = append(args, r...)
			}
			st := tx.StmtContext(ctx, full)
			if k < floorLedgerRows {
				if st, err = tx.PrepareContext(ctx, text(k)); err != nil {
					tx.Rollback()
					return err
				}
			}
			_, err = st.ExecContext(ctx, args...)
			if cerr := st.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				tx.Rollback()
				return err
			}
			rows = rows[k:]
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		var part Run
		if err := m.stop(&part); err != nil {
			return err
		}
		run.Elapsed += part.Elapsed
		run.CPU += part.CPU
		run.Syscalls += part.Syscalls
		run.SyscallsSeen = part.SyscallsSeen
		return nil
	}
	contract := spool.DefaultContract()
	at := time.Now().UTC().Format(time.RFC3339Nano)
	rows := make([][]any, 0, floorLedgerTx)
	_, err = sample.Generate(n, gen, func(f sample.File) error {
		run.N++
		if m, err := contract.Parse(f.Data); err == nil { // else poison: a dead letter, no processed row
			var seq any
			if m.Seq != 0 {
				seq = m.Seq
			}
			rows = append(rows, []any{m.MsgID, m.OrderNo, seq, string(m.Amount), at,
				fmt.Sprintf("bench.jsonl#L%d", run.N), spool.ContentHash(m.Raw), string(m.Raw),
				fmt.Sprintf("floor-%d#%d", n, run.N), int64(run.N)})
		}
		if run.N%floorLedgerTx != 0 && run.N != n {
			return nil
		}
		err := commit(rows)
		rows = rows[:0]
		return err
	})
	if err != nil {
		return run, fmt.Errorf("floor (ledger): %w", err)
	}
	if run.N == 0 {
		return run, errors.New("floor (ledger): nothing to write")
	}
	return run, nil
}

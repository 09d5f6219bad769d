package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/spoolq/spool"
)

// UnfencedEnv names the test-only switch that turns the check of a
// session's lease in its writes off (fence): set to 1 when a ledger opens,
// its Record, Reserve and Settle commit a session's claims even after
// another consumer took the session's lease over. It exists to show that
// the multi-host test fails without fencing; nothing else may set it.
const UnfencedEnv = "SPOOL_TEST_UNFENCED"

// errNoLeases is returned by the lease methods on an engine that keeps none.
var errNoLeases = errors.New("this ledger's engine keeps no leases")

// leases is what a DB knows of the leases it holds.
type leases struct {
	sql      LeaseSQL
	ok       bool // the engine keeps leases
	unfenced bool // UnfencedEnv: the writes do not check them
	// held are the sessions whose lease this DB acquired: their writes are
	// fenced (fence).
	mu   sync.Mutex
	held map[string]bool
}

func newLeases(d Dialect) *leases {
	ls, ok := d.Leases()
	return &leases{sql: ls, ok: ok, unfenced: os.Getenv(UnfencedEnv) == "1", held: map[string]bool{}}
}

// HoldsLeases reports whether the engine keeps leases; see
// spool.Ledger.
func (l Consumer) HoldsLeases() bool { return l.db.lease.ok }

func micros(d time.Duration) int64 { return d.Microseconds() }

// AcquireSessionLease creates session's lease; see spool.Ledger.
func (l Consumer) AcquireSessionLease(ctx context.Context, session string, d time.Duration) error {
	if err := l.db.leaseOp(); err != nil {
		return err
	}
	q := l.db.dialect.Rebind(`INSERT INTO session_leases (session, expires, taken) VALUES (?, ` + l.db.lease.sql.Later + `, 0)`)
	if _, err := l.db.sql.ExecContext(ctx, q, session, micros(d)); err != nil {
		return l.db.fail("acquire lease of "+session, err)
	}
	l.db.lease.mu.Lock()
	l.db.lease.held[session] = true
	l.db.lease.mu.Unlock()
	return nil
}

// RenewSessionLease renews session's lease; see spool.Ledger.
func (l Consumer) RenewSessionLease(ctx context.Context, session string, d time.Duration) error {
	if err := l.db.leaseOp(); err != nil {
		return err
	}
	q := l.db.dialect.Rebind(`UPDATE session_leases SET expires = ` + l.db.lease.sql.Later + ` WHERE session = ? AND taken = 0`)
	r, err := l.db.sql.ExecContext(ctx, q, micros(d), session)
	if err != nil {
		return l.db.fail("renew lease of "+session, err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return l.db.fail("renew lease of "+session, err)
	}
	if n == 0 {
		return fmt.Errorf("renew lease of %s: %w", session, spool.ErrLeaseLost)
	}
	return nil
}

// TakeOverSessionLease takes session's expired lease over; see spool.Ledger.
func (l Consumer) TakeOverSessionLease(ctx context.Context, session string) (spool.LeaseState, error) {
	if err := l.db.leaseOp(); err != nil {
		return spool.LeaseUnknown, err
	}
	q := l.db.dialect.Rebind(`UPDATE session_leases SET taken = 1 WHERE session = ? AND taken = 0 AND expires < ` + l.db.lease.sql.Now)
	if _, err := l.db.sql.ExecContext(ctx, q, session); err != nil {
		return spool.LeaseUnknown, l.db.fail("take over lease of "+session, err)
	}
	var taken int
	err := l.db.sql.QueryRowContext(ctx, l.db.dialect.Rebind(`SELECT taken FROM session_leases WHERE session = ?`), session).Scan(&taken)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return spool.LeaseUnknown, nil
	case err != nil:
		return spool.LeaseUnknown, l.db.fail("take over lease of "+session, err)
	case taken != 0:
		return spool.LeaseTaken, nil
	}
	return spool.LeaseLive, nil
}

// DropSessionLease removes session's lease; see spool.Ledger.
func (l Consumer) DropSessionLease(ctx context.Context, session string) error {
	if err := l.db.leaseOp(); err != nil {
		return err
	}
	if _, err := l.db.sql.ExecContext(ctx, l.db.dialect.Rebind(`DELETE FROM session_leases WHERE session = ?`), session); err != nil {
		return l.db.fail("drop lease of "+session, err)
	}
	l.db.lease.mu.Lock()
	delete(l.db.lease.held, session)
	l.db.lease.mu.Unlock()
	return nil
}

func (db *DB) leaseOp() error {
	if err := db.open(); err != nil {
		return err
	}
	if !db.lease.ok {
		return errNoLeases
	}
	return nil
}

// fenced lists, each once, the sessions of the batch's deliveries whose
// lease this DB holds and its writes check (fence): none where the engine
// keeps no leases or the check is off (UnfencedEnv).
func (db *DB) fenced(batch []*spool.Delivery) []string {
	if !db.lease.ok || db.lease.unfenced {
		return nil
	}
	db.lease.mu.Lock()
	defer db.lease.mu.Unlock()
	if len(db.lease.held) == 0 {
		return nil
	}
	var sessions []string
	for _, d := range batch {
		if db.lease.held[d.Consumer] && !slices.Contains(sessions, d.Consumer) {
			sessions = append(sessions, d.Consumer)
		}
	}
	return sessions
}

// fence is the first statement of every write transaction of deliveries:
// for each session of the batch whose lease this DB holds, it reads the
// session's lease row with a share lock, and fails with spool.ErrLeaseLost
// when the row is gone or taken. The lock makes a takeover (an UPDATE of
// the row) wait for this transaction's end, and this read wait for the
// takeover's: either the batch commits before the takeover, and the
// recovering consumer, which reads the ledger only after it, sees the
// batch's outcomes, or the batch finds the lease taken and commits
// nothing. The token a write carries is thus its deliveries' session: a
// session ID is made afresh by every join and a lease row is created once,
// so a session whose claims were taken over can never write again.
func (db *DB) fence(ctx context.Context, tx *sql.Tx, batch []*spool.Delivery) error {
	q := db.dialect.Rebind(`SELECT taken FROM session_leases WHERE session = ? ` + db.lease.sql.Share)
	for _, s := range db.fenced(batch) {
		var taken int
		err := tx.QueryRowContext(ctx, q, s).Scan(&taken)
		switch {
		case errors.Is(err, sql.ErrNoRows) || (err == nil && taken != 0):
			return fmt.Errorf("session %s: %w", s, spool.ErrLeaseLost)
		case err != nil:
			return fmt.Errorf("check lease of %s: %w", s, err)
		}
	}
	return nil
}

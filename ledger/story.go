package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool"
)

// Retry is a message waiting for a retry after a transient failure of its
// business work: one row of the attempts table.
type Retry struct {
	MsgID string
	// File is the name it had in inbox/ when it last failed.
	File string
	// Attempts is how many times the work failed so far.
	Attempts int
	// FirstFailure and LastFailure bound the failed attempts; NextAt is
	// when it may be tried again.
	FirstFailure, LastFailure, NextAt time.Time
	// LastError is the last failure's error text.
	LastError string
}

// Retries returns the messages waiting for a retry, the soonest due first,
// for `spool status`, `spool show` and `spool flush`.
func (ms Messages) Retries(ctx context.Context) ([]Retry, error) {
	if err := ms.db.open(); err != nil {
		return nil, err
	}
	rows, err := ms.db.sql.QueryContext(ctx, ms.db.dialect.Rebind(`SELECT msg_id, file, attempts, first_failure, last_failure, next_at, last_error
FROM attempts
ORDER BY next_at, msg_id`))
	if err != nil {
		return nil, ms.db.fail("list retries", err)
	}
	defer rows.Close()
	var out []Retry
	for rows.Next() {
		var (
			r                  Retry
			first, last, nextS string
		)
		if err := rows.Scan(&r.MsgID, &r.File, &r.Attempts, &first, &last, &nextS, &r.LastError); err != nil {
			return nil, ms.db.fail("list retries", err)
		}
		for _, t := range []struct {
			dst  *time.Time
			col  string
			text string
		}{{&r.FirstFailure, "attempts.first_failure", first}, {&r.LastFailure, "attempts.last_failure", last}, {&r.NextAt, "attempts.next_at", nextS}} {
			if *t.dst, err = parseTime(t.col, t.text); err != nil {
				return nil, err
			}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, ms.db.fail("list retries", err)
	}
	return out, nil
}

// FlushRetries makes the retries of ids (every waiting retry when ids is
// empty) due at at, as Postfix's postqueue -f does, and returns the msg_ids
// it changed. A retry already due by then is left as it is, and an id that
// waits for no retry is not in the result, so the caller can name it. The
// attempt counts are kept: a flushed message that fails again is still
// dead-lettered after the same number of attempts.
func (ms Messages) FlushRetries(ctx context.Context, ids []string, at time.Time) ([]string, error) {
	if err := ms.db.open(); err != nil {
		return nil, err
	}
	now := formatTime(at)
	var flushed []string
	err := ms.db.inTx(ctx, func(tx *sql.Tx) error {
		flushed = nil // a retried transaction starts again (inTx)
		q := `SELECT msg_id FROM attempts WHERE next_at > ?`
		args := []any{now}
		if len(ids) > 0 {
			q += ` AND msg_id IN (` + placeholders(len(ids)) + `)`
			for _, id := range ids {
				args = append(args, id)
			}
		}
		rows, err := tx.QueryContext(ctx, ms.db.dialect.Rebind(q), args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			flushed = append(flushed, id)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		for _, id := range flushed {
			if _, err := tx.ExecContext(ctx, ms.db.dialect.Rebind(`UPDATE attempts SET next_at = ? WHERE msg_id = ?`), now, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, ms.db.fail("flush retries", err)
	}
	slices.Sort(flushed)
	return flushed, nil
}

// Story is everything the ledger holds about one message, for `spool
// show`: its processed row, every other delivery of it (duplicates,
// conflicts and dead letters, in commit order), its pending retry and the
// replays of its files.
type Story struct {
	// MsgID is the message's key; empty for a file rejected without a
	// valid one, known by its name alone.
	MsgID string
	// Processed is the processed row and ProcessedIno its file's inode (0
	// when unknown); nil when the msg_id was never processed.
	Processed    *Row
	ProcessedIno uint64
	// Deliveries are the duplicate and dead-letter deliveries of the msg_id
	// (or, without one, of the file name), oldest first.
	Deliveries []StoryDelivery
	// Retry is the retry it waits for; nil when none.
	Retry *Retry
	// Replays are the replays of any of its files, oldest first.
	Replays []ReplayRecord
	// Reservation is the msg_id's reservation for a call (a Caller's,
	// --post's, --exec's) in flight, or that a consumer killed while
	// calling left; nil when none.
	Reservation *StoryReservation
}

// StoryReservation is a msg_id's reservation: the claim it was reserved
// for, by which consumer session, when, and the session's call bound
// (zero when an older spool recorded none).
type StoryReservation struct {
	Claim, Owner string
	At           time.Time
	CallBound    time.Duration
}

// Empty reports whether the ledger knows nothing of the message.
func (s Story) Empty() bool {
	return s.Processed == nil && len(s.Deliveries) == 0 && s.Retry == nil && len(s.Replays) == 0 && s.Reservation == nil
}

// Files returns the distinct names the message's files had, in the order
// the ledger first saw them: the names to look for in the stages.
func (s Story) Files() []string {
	var out []string
	add := func(n string) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if s.Processed != nil {
		add(s.Processed.File)
	}
	for _, d := range s.Deliveries {
		add(d.File)
	}
	if s.Retry != nil {
		add(s.Retry.File)
	}
	for _, r := range s.Replays {
		add(r.File)
		add(r.NewName)
	}
	return out
}

// StoryDelivery is a recorded delivery other than the processed one.
type StoryDelivery struct {
	DeadLetterRecord
	// Outcome is duplicate or dead-letter.
	Outcome spool.Outcome
	// Conflict marks a duplicate whose content differs from the processed
	// row's.
	Conflict bool
}

// Story returns what the ledger holds about the message msgID, or, when
// msgID is empty, about the file that had the name file in inbox/ (a dead
// letter without a valid msg_id). Look at Story.Empty for a message the
// ledger never saw.
func (ms Messages) Story(ctx context.Context, msgID, file string) (Story, error) {
	if err := ms.db.open(); err != nil {
		return Story{}, err
	}
	st := Story{MsgID: msgID}
	if msgID != "" {
		r, ok, err := ms.Processed(ctx, msgID)
		if err != nil {
			return Story{}, err
		}
		if ok {
			st.Processed = &r
			var ino sql.NullInt64
			if err := ms.db.sql.QueryRowContext(ctx, ms.db.dialect.Rebind(`SELECT ino FROM processed WHERE msg_id = ?`), msgID).Scan(&ino); err != nil {
				return Story{}, ms.db.fail("processed row "+msgID, err)
			}
			st.ProcessedIno = uint64(ino.Int64)
		}
	}
	where, arg := `msg_id = ?`, msgID
	if msgID == "" {
		where, arg = `file = ?`, clean(file)
	}
	rows, err := ms.db.sql.QueryContext(ctx, ms.db.dialect.Rebind(`SELECT `+deadLetterColumns+`, outcome, conflict
FROM deliveries
WHERE outcome <> 'processed' AND `+where+`
ORDER BY id`), arg)
	if err != nil {
		return Story{}, ms.db.fail("deliveries of "+arg, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			d        StoryDelivery
			ino      sql.NullInt64
			reason   sql.NullString
			at       string
			size     sql.NullInt64
			attempts sql.NullInt64
			field    sql.NullString
			detail   sql.NullString
			id       sql.NullString
			hash     sql.NullString
			first    sql.NullString
			last     sql.NullString
			outcome  string
			conflict int
		)
		if err := rows.Scan(&d.ID, &d.File, &ino, &reason, &field, &detail, &at, &d.Claim, &d.Consumer,
			&id, &hash, &size, &attempts, &first, &last, &outcome, &conflict); err != nil {
			return Story{}, ms.db.fail("deliveries of "+arg, err)
		}
		d.Ino, d.Reason = uint64(ino.Int64), spool.Reason(reason.String)
		d.Field, d.Detail, d.MsgID, d.ContentHash = field.String, detail.String, id.String, hash.String
		d.Size, d.Attempts = size.Int64, int(attempts.Int64)
		d.Outcome, d.Conflict = spool.Outcome(outcome), conflict != 0
		if d.At, err = parseTime("deliveries.at", at); err != nil {
			return Story{}, err
		}
		if first.Valid {
			if d.FirstFailure, err = parseTime("deliveries.first_failure", first.String); err != nil {
				return Story{}, err
			}
		}
		if last.Valid {
			if d.LastFailure, err = parseTime("deliveries.last_failure", last.String); err != nil {
				return Story{}, err
			}
		}
		st.Deliveries = append(st.Deliveries, d)
	}
	if err := rows.Err(); err != nil {
		return Story{}, ms.db.fail("deliveries of "+arg, err)
	}
	if msgID != "" {
		if st.Reservation, err = ms.reservation(ctx, msgID); err != nil {
			return Story{}, err
		}
		retries, err := ms.Retries(ctx)
		if err != nil {
			return Story{}, err
		}
		for i := range retries {
			if retries[i].MsgID == msgID {
				st.Retry = &retries[i]
			}
		}
	}
	files := st.Files()
	if msgID == "" && !slices.Contains(files, file) {
		files = append(files, file)
	}
	replays, err := ms.db.Replays().List(ctx)
	if err != nil {
		return Story{}, err
	}
	for _, r := range replays {
		if slices.Contains(files, r.File) || slices.Contains(files, r.NewName) {
			st.Replays = append(st.Replays, r)
		}
	}
	return st, nil
}

// MsgIDOfFile returns the msg_id the ledger recorded for a file of that
// name in inbox/ (its processed row or another delivery), and false when it
// recorded none.
func (ms Messages) MsgIDOfFile(ctx context.Context, file string) (string, bool, error) {
	if err := ms.db.open(); err != nil {
		return "", false, err
	}
	var id sql.NullString
	err := ms.db.sql.QueryRowContext(ctx, ms.db.dialect.Rebind(`SELECT msg_id FROM claims WHERE file = ? AND msg_id IS NOT NULL`), clean(file)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, ms.db.fail(fmt.Sprintf("msg_id of file %s", clean(file)), err)
	}
	return id.String, id.Valid, nil
}

// reservation returns msgID's reservation, nil when it has none.
func (ms Messages) reservation(ctx context.Context, msgID string) (*StoryReservation, error) {
	var r StoryReservation
	var at string
	var bound sql.NullInt64
	err := ms.db.sql.QueryRowContext(ctx, ms.db.dialect.Rebind(`SELECT claim, owner, at, call_bound_us FROM reservations WHERE msg_id = ?`), msgID).
		Scan(&r.Claim, &r.Owner, &at, &bound)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, ms.db.fail("reservation of "+msgID, err)
	}
	if r.At, err = parseTime("reservations.at", at); err != nil {
		return nil, err
	}
	r.CallBound = time.Duration(bound.Int64) * time.Microsecond
	return &r, nil
}

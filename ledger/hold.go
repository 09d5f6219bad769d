package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spoolq/spool"
)

// An operator's pause of the queue and holds of messages (migration 040,
// docs/DESIGN.md, "Pause and hold") live in the ledger, so that every
// consumer of the queue, on every host, sees them: table spool_pause (one
// row, with a version that grows at every change of the pause or of the
// held msg_ids, which a consumer polls), spool_held_ids (the msg_ids
// held) and spool_held_files (the files in held/, with who held them and
// why). The files themselves are in the queue's held/ stage; package hold
// moves them and writes the audit, and the consumer reads the pause and
// the held msg_ids through spool.Ledger's Holds.

// Holding is the operator's pause of the queue and holds of messages, as
// the operator's commands see them (tables spool_pause, spool_held_ids,
// spool_held_files): pausing and resuming with its audit row in the same
// transaction, holding and releasing msg_ids, and the records of the
// files in held/. Every change bumps the version a consumer's poll
// (DB.Holds) compares, so that none is missed. Reached by DB.Holding.
type Holding struct{ db *DB }

// Holding returns the ledger's pause and holds.
func (db *DB) Holding() Holding { return Holding{db} }

// Causes of a HeldFile.
const (
	// HeldByFile: an operator held the file by its name (spool hold FILE).
	HeldByFile = "file"
	// HeldByMsgID: a consumer set the file aside because its msg_id is
	// held (spool hold --msg-id).
	HeldByMsgID = "msg_id"
)

// Holder is who holds (or paused, or resumed), how and why.
type Holder struct {
	// By is an audit actor (os:alice, token:olga); Role its role over
	// HTTP, empty on the command line; Via AuditCLI or AuditHTTP.
	By, Role, Via string
	// Note says why; may be empty.
	Note string
	// At is when; zero for now.
	At time.Time
}

func (h Holder) at() string {
	if h.At.IsZero() {
		return formatTime(time.Now())
	}
	return formatTime(h.At)
}

func (h Holder) check() error {
	if strings.TrimSpace(h.By) == "" || strings.TrimSpace(h.Via) == "" {
		return errors.New("who (by, via) is required")
	}
	return nil
}

// PauseState is the queue's pause as the ledger holds it.
type PauseState struct {
	// Paused says whether the queue is paused now.
	Paused bool
	// Holder is who made the last change (the pause, or the resume that
	// ended it), when and why; empty when the queue was never paused.
	Holder
	// Version grows at every change of the pause or the held msg_ids.
	Version int64
}

// PauseState returns the queue's pause.
func (hs Holding) PauseState(ctx context.Context) (PauseState, error) {
	if err := hs.db.open(); err != nil {
		return PauseState{}, err
	}
	p, err := readPause(ctx, hs.db.sql, "")
	if err != nil {
		return PauseState{}, hs.db.fail("read pause", err)
	}
	return p, nil
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readPause reads the pause row; lock, appended, locks it in a
// transaction.
func readPause(ctx context.Context, q querier, lock string) (PauseState, error) {
	var (
		p      PauseState
		paused int64
		at     string
	)
	err := q.QueryRowContext(ctx, `SELECT paused, version, by_user, by_role, via, note, at FROM spool_pause WHERE id = 1`+lock).
		Scan(&paused, &p.Version, &p.By, &p.Role, &p.Via, &p.Note, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return PauseState{}, nil // never paused (the row is made by 040)
	}
	if err != nil {
		return PauseState{}, err
	}
	p.Paused = paused != 0
	if at != "" {
		if p.At, err = parseTime("spool_pause.at", at); err != nil {
			return PauseState{}, err
		}
	}
	return p, nil
}

// SetPause pauses the queue (paused true) or resumes it, as h says, and
// writes the audit row e, closed ok with detail, in the same
// transaction: a pause is never changed unaudited. It returns the pause
// as it was before; changed is false, and nothing but the audit row is
// written (its detail then says so), when the queue was paused (resumed)
// already: a second pause keeps the first one's who and why.
func (hs Holding) SetPause(ctx context.Context, paused bool, h Holder, e AuditEntry) (before PauseState, changed bool, err error) {
	if err := hs.db.open(); err != nil {
		return PauseState{}, false, err
	}
	if err := h.check(); err != nil {
		return PauseState{}, false, fmt.Errorf("set pause: %w", err)
	}
	if err := checkAuditEntry(e); err != nil {
		return PauseState{}, false, fmt.Errorf("set pause: audit: %w", err)
	}
	want, at := 0, h.at()
	if paused {
		want = 1
	}
	err = hs.db.inTx(ctx, func(tx *sql.Tx) error {
		changed = false // a retried transaction starts again (inTx)
		if before, err = readPause(ctx, tx, hs.db.forUpdate()); err != nil {
			return err
		}
		detail := "paused"
		if !paused {
			detail = "resumed"
		}
		if before.Paused != paused {
			res, err := tx.ExecContext(ctx, hs.db.dialect.Rebind(`UPDATE spool_pause
SET paused = ?, version = version + 1, by_user = ?, by_role = ?, via = ?, note = ?, at = ?
WHERE id = 1 AND paused <> ?`), want, clean(h.By), clean(h.Role), clean(h.Via), clean(h.Note), at, want)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			changed = n == 1
		}
		if !changed {
			detail = "already " + detail + ": nothing changed"
		}
		e.At = h.At
		_, err := hs.db.auditInsertTx(ctx, tx, e, AuditOK, "{}", detail, at)
		return err
	})
	if err != nil {
		return PauseState{}, false, hs.db.fail("set pause", err)
	}
	return before, changed, nil
}

// forUpdate is the clause that locks the pause row read in a write
// transaction against every other writer of it until the end of this one:
// FOR UPDATE on an engine of many concurrent writers, those that keep
// leases by row locks (PostgreSQL, MariaDB, which both spell it so), and
// nothing where writers take turns (SQLite). A share lock would not do:
// two pausers holding one each would deadlock on their UPDATEs.
func (db *DB) forUpdate() string {
	if _, ok := db.dialect.Leases(); ok {
		return " FOR UPDATE"
	}
	return ""
}

// forShare is the clause that locks a row read in a write transaction
// against another's UPDATE or DELETE until the end of this one (the
// lease SQL's share lock; nothing on SQLite).
func (db *DB) forShare() string {
	if ls, ok := db.dialect.Leases(); ok && ls.Share != "" {
		return " " + ls.Share
	}
	return ""
}

// HeldID is a msg_id an operator holds.
type HeldID struct {
	MsgID string
	Holder
}

// HoldMsgIDs holds ids as h says: a consumer sets every delivery of each
// aside into held/ instead of processing it, until Holding.ReleaseMsgIDs. It
// returns those it added; an id held already keeps its first holder.
// Each id must be a valid key (non-blank, within the engine's bound).
func (hs Holding) HoldMsgIDs(ctx context.Context, ids []string, h Holder) (added []string, err error) {
	if err := hs.db.open(); err != nil {
		return nil, err
	}
	if err := h.check(); err != nil {
		return nil, fmt.Errorf("hold msg_ids: %w", err)
	}
	for _, id := range ids {
		if strings.TrimSpace(id) == "" || strings.Contains(id, "\x00") {
			return nil, fmt.Errorf("hold msg_id %q: not a key", id)
		}
		if m := hs.db.dialect.MaxKey(); m > 0 && len(id) > m {
			return nil, fmt.Errorf("hold msg_id: %d bytes, over this ledger's %d", len(id), m)
		}
	}
	at := h.at()
	ins := hs.db.dialect.Rebind(hs.db.dialect.InsertNew(`INSERT INTO spool_held_ids (msg_id, by_user, by_role, via, note, at) VALUES (?, ?, ?, ?, ?, ?)`, "msg_id", ""))
	err = hs.db.inTx(ctx, func(tx *sql.Tx) error {
		added = nil
		// The pause row first, locked: the version and the set change
		// together, and a consumer's RecordHeld waits for them.
		if _, err := readPause(ctx, tx, hs.db.forUpdate()); err != nil {
			return err
		}
		for _, id := range ids {
			res, err := tx.ExecContext(ctx, ins, id, clean(h.By), clean(h.Role), clean(h.Via), clean(h.Note), at)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 1 {
				added = append(added, id)
			}
		}
		return hs.db.bumpVersion(ctx, tx, len(added))
	})
	if err != nil {
		return nil, hs.db.fail("hold msg_ids", err)
	}
	return added, nil
}

// ReleaseMsgIDs ends the holds of ids and returns those that were held.
// A consumer that is setting a delivery of one aside at that moment
// either recorded it before (RecordHeld holds the hold's row until it
// commits), and Holding.HeldFiles then lists it, or finds the hold gone and puts
// the file back into inbox/ itself.
func (hs Holding) ReleaseMsgIDs(ctx context.Context, ids []string) (removed []string, err error) {
	if err := hs.db.open(); err != nil {
		return nil, err
	}
	del := hs.db.dialect.Rebind(`DELETE FROM spool_held_ids WHERE msg_id = ?`)
	err = hs.db.inTx(ctx, func(tx *sql.Tx) error {
		removed = nil
		if _, err := readPause(ctx, tx, hs.db.forUpdate()); err != nil {
			return err
		}
		for _, id := range ids {
			res, err := tx.ExecContext(ctx, del, id)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n > 0 {
				removed = append(removed, id)
			}
		}
		return hs.db.bumpVersion(ctx, tx, len(removed))
	})
	if err != nil {
		return nil, hs.db.fail("release msg_ids", err)
	}
	return removed, nil
}

// bumpVersion tells the consumers' polls that the held msg_ids changed,
// when n did.
func (db *DB) bumpVersion(ctx context.Context, tx *sql.Tx, n int) error {
	if n == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, `UPDATE spool_pause SET version = version + 1 WHERE id = 1`)
	return err
}

// HeldIDs returns the msg_ids held, in msg_id order.
func (hs Holding) HeldIDs(ctx context.Context) ([]HeldID, error) {
	return queryAll(ctx, hs.db, "read held msg_ids", `SELECT msg_id, by_user, by_role, via, note, at FROM spool_held_ids ORDER BY msg_id`, nil,
		func(rows *sql.Rows) (HeldID, error) {
			var (
				h  HeldID
				at string
			)
			if err := rows.Scan(&h.MsgID, &h.By, &h.Role, &h.Via, &h.Note, &at); err != nil {
				return h, err
			}
			var err error
			h.At, err = parseTime("spool_held_ids.at", at)
			return h, err
		})
}

// HeldFile is the record of a file in held/.
type HeldFile struct {
	// ID is the record's number.
	ID int64
	// File is its name in held/, Ino its inode, Origin the name it had in
	// inbox/, MsgID its key when known ("" otherwise).
	File   string
	Ino    uint64
	Origin string
	MsgID  string
	// Cause is HeldByFile or HeldByMsgID.
	Cause string
	Holder
}

// RecordHeldFile records f, whose file an operator has just moved into
// held/, and returns its ID. The move comes first: a record always names
// a file in held/.
func (hs Holding) RecordHeldFile(ctx context.Context, f HeldFile) (int64, error) {
	if err := hs.db.open(); err != nil {
		return 0, err
	}
	if err := f.check(); err != nil {
		return 0, fmt.Errorf("record held file %s: %w", f.File, err)
	}
	var id int64
	err := hs.db.inTx(ctx, func(tx *sql.Tx) (err error) {
		id, err = hs.db.insertHeld(ctx, tx, f)
		return err
	})
	if err != nil {
		return 0, hs.db.fail("record held file "+f.File, err)
	}
	return id, nil
}

func (db *DB) insertHeld(ctx context.Context, tx *sql.Tx, f HeldFile) (int64, error) {
	cause := f.Cause
	if cause == "" {
		cause = HeldByFile
	}
	var id int64
	err := tx.QueryRowContext(ctx, db.dialect.Rebind(`INSERT INTO spool_held_files
    (file, ino, origin, msg_id, cause, by_user, by_role, via, note, at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`),
		clean(f.File), nullIno(f.Ino), clean(f.Origin), nullString(f.MsgID), cause,
		clean(f.By), clean(f.Role), clean(f.Via), clean(f.Note), f.at()).Scan(&id)
	return id, err
}

// RecordHeld records a delivery a consumer set aside into held/ because
// its msg_id is held, with that hold's holder and note, provided the
// msg_id is still held: the hold's row is locked against Holding.ReleaseMsgIDs
// until the record commits. It reports false, recording nothing, when
// the msg_id was released meanwhile; see spool.Ledger.
func (l Consumer) RecordHeld(ctx context.Context, h spool.HeldAside) (bool, error) {
	if err := l.db.open(); err != nil {
		return false, err
	}
	held := false
	err := l.db.inTx(ctx, func(tx *sql.Tx) error {
		held = false // a retried transaction starts again (inTx)
		f := HeldFile{File: h.File, Ino: h.Ino, Origin: h.Origin, MsgID: h.MsgID, Cause: HeldByMsgID}
		err := tx.QueryRowContext(ctx, l.db.dialect.Rebind(`SELECT by_user, by_role, via, note FROM spool_held_ids WHERE msg_id = ?`)+l.db.forShare(), h.MsgID).
			Scan(&f.By, &f.Role, &f.Via, &f.Note)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		held = true
		_, err = l.db.insertHeld(ctx, tx, f)
		return err
	})
	if err != nil {
		return false, l.db.fail("record held "+h.File, err)
	}
	return held, nil
}

// HeldFiles returns the records of the files in held/, oldest first.
func (hs Holding) HeldFiles(ctx context.Context) ([]HeldFile, error) {
	return queryAll(ctx, hs.db, "read held files", `SELECT id, file, ino, origin, msg_id, cause, by_user, by_role, via, note, at FROM spool_held_files ORDER BY id`, nil,
		func(rows *sql.Rows) (HeldFile, error) {
			var (
				f     HeldFile
				ino   sql.NullInt64
				msgID sql.NullString
				at    string
			)
			if err := rows.Scan(&f.ID, &f.File, &ino, &f.Origin, &msgID, &f.Cause, &f.By, &f.Role, &f.Via, &f.Note, &at); err != nil {
				return f, err
			}
			f.Ino, f.MsgID = uint64(ino.Int64), msgID.String
			var err error
			f.At, err = parseTime("spool_held_files.at", at)
			return f, err
		})
}

// ForgetHeldFiles deletes the records ids: before their files leave
// held/ (a release), or once they are gone from it (fsck --repair).
func (hs Holding) ForgetHeldFiles(ctx context.Context, ids []int64) error {
	if err := hs.db.open(); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	del := hs.db.dialect.Rebind(`DELETE FROM spool_held_files WHERE id = ?`)
	err := hs.db.inTx(ctx, func(tx *sql.Tx) error {
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, del, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return hs.db.fail("forget held files", err)
	}
	return nil
}

// Holds returns the queue's pause and held msg_ids for a consumer's poll;
// see spool.Ledger. The set is read only when version is not the
// current one.
func (l Consumer) Holds(ctx context.Context, version int64) (spool.Holds, error) {
	if err := l.db.open(); err != nil {
		return spool.Holds{}, err
	}
	p, err := readPause(ctx, l.db.sql, "")
	if err != nil {
		return spool.Holds{}, l.db.fail("read holds", err)
	}
	out := spool.Holds{Version: p.Version}
	if p.Paused {
		out.Paused = &spool.Pause{By: p.By, Via: p.Via, Note: p.Note, At: p.At}
	}
	if version == p.Version {
		return out, nil
	}
	rows, err := l.db.sql.QueryContext(ctx, `SELECT msg_id FROM spool_held_ids`)
	if err != nil {
		return spool.Holds{}, l.db.fail("read holds", err)
	}
	defer rows.Close()
	out.MsgIDs = map[string]struct{}{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return spool.Holds{}, l.db.fail("read holds", err)
		}
		out.MsgIDs[id] = struct{}{}
	}
	if err := rows.Err(); err != nil {
		return spool.Holds{}, l.db.fail("read holds", err)
	}
	return out, nil
}

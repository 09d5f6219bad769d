package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The audit is the ledger's record of every operator action that changed
// the queue or the ledger, and of every refusal of one: who asked, how,
// what, when, and how it ended. An action writes its row with AuditLog.Begin,
// as started, before it changes anything, and closes it with AuditLog.End
// after, so that a row still started names an action that is running or
// was killed; the row's host and pid tell which (docs/DESIGN.md, "Audit").
// Rows are never deleted.

// Audit outcomes, as stored in audit.outcome.
const (
	// AuditStarted: written by AuditLog.Begin; the action is running, or was
	// killed before AuditLog.End.
	AuditStarted = "started"
	// AuditOK: the action did what it was asked.
	AuditOK = "ok"
	// AuditFailed: the action stopped on an error (Detail says which);
	// its counts say how far it got.
	AuditFailed = "failed"
	// AuditInterrupted: the action's process was gone before it recorded
	// an outcome, as found by a later run (or it was stopped by a signal).
	AuditInterrupted = "interrupted"
	// AuditRefused: the action was refused before it changed anything
	// (wrong role, a policy, bad input); Detail says why.
	AuditRefused = "refused"
)

// AuditLog is the audit of operator actions (table spool_audit): every action
// that changed the queue or the ledger, and every refusal of one, as a row
// that is written before the action changes anything and closed after it.
// Rows are never deleted, and a closed row is never reopened except to
// correct an AuditInterrupted outcome (End). Reached by DB.Audit.
type AuditLog struct{ db *DB }

// Audit returns the ledger's audit log.
func (db *DB) Audit() AuditLog { return AuditLog{db} }

// auditOutcomes are the outcomes AuditLog.End and AuditLog.Record accept.
var auditOutcomes = []string{AuditOK, AuditFailed, AuditInterrupted, AuditRefused}

// Audit vias: how the action was asked.
const (
	// AuditCLI: on the command line; the actor is the OS user or --by.
	AuditCLI = "cli"
	// AuditHTTP: over the HTTP API; the actor is the token's name.
	AuditHTTP = "http"
)

// ErrAuditClosed is wrapped by AuditLog.End for a row that already has its
// final outcome (ok, failed or refused), or that does not exist.
var ErrAuditClosed = errors.New("audit row already closed or unknown")

// AuditEntry is what an action says of itself when it begins: AuditLog.Begin
// writes it, AuditLog.List gives it back in AuditRow.
type AuditEntry struct {
	// At is when the action began; zero for now. Stored in UTC to the
	// microsecond.
	At time.Time
	// Actor is who asked: the OS user or --by on the command line, a
	// token's name over HTTP. Required.
	Actor string
	// Role is the actor's role (viewer, operator, approver); empty on the
	// command line, which has none.
	Role string
	// Via is how it was asked: AuditCLI or AuditHTTP (any other short
	// word is kept as it is). Required.
	Via string
	// Action is what was asked, one short word: "replay", "discard",
	// "flush", "repair", "prune", "bind", "backup", "approve", "cancel"...
	// Required.
	Action string
	// Selection is what the action was asked to act on, as JSON text
	// (an object by convention: {"names":[...]}, {"reason":"parse"},
	// {"all":true}); empty is stored as {}. It must be valid JSON; its
	// strings are stored as valid UTF-8 (invalid bytes become U+FFFD), so
	// a caller that must keep a name's exact bytes encodes them itself.
	Selection string
	// Host and PID are the process that writes the row (queue.Host,
	// os.Getpid), by which a later reader tells a killed run (a started
	// row whose process is gone from its host) from a running one. Empty
	// and 0 when unknown.
	Host string
	PID  int
	// Task is the durable task the row is about (a replay or discard
	// task, its approval or cancel), 0 for none.
	Task int64
}

// Select returns e with its Selection set to sel marshalled as JSON (nil
// leaves it empty, stored as {}): the one way every face fills it. A
// value JSON cannot encode is an error naming e's Action.
func (e AuditEntry) Select(sel any) (AuditEntry, error) {
	if sel == nil {
		return e, nil
	}
	b, err := json.Marshal(sel)
	if err != nil {
		return e, fmt.Errorf("audit %s: selection: %w", e.Action, err)
	}
	e.Selection = string(b)
	return e, nil
}

// AuditCounts are an action's counts by name ("selected", "done",
// "skipped", "missing"...), stored as one JSON object.
type AuditCounts map[string]int64

// AuditRow is one row of the audit as AuditLog.List reads it.
type AuditRow struct {
	// ID is the row's number: assigned when the row is written, larger
	// for each later row, never reused (not necessarily without gaps).
	ID int64
	AuditEntry
	// Outcome is AuditStarted until AuditLog.End, then one of AuditOK,
	// AuditFailed, AuditInterrupted, AuditRefused.
	Outcome string
	// Counts are the counts AuditLog.End recorded; empty while started.
	Counts AuditCounts
	// Detail is why: the error of a failure, the reason of a refusal, a
	// summary; may be empty.
	Detail string
	// Ended is when the outcome was recorded; zero while started.
	Ended time.Time
}

// checkAuditEntry reports the first required field e lacks, or bad JSON.
func checkAuditEntry(e AuditEntry) error {
	switch {
	case strings.TrimSpace(e.Actor) == "":
		return errors.New("actor is required")
	case strings.TrimSpace(e.Via) == "":
		return errors.New("via is required")
	case strings.TrimSpace(e.Action) == "":
		return errors.New("action is required")
	case e.Selection != "" && !json.Valid([]byte(e.Selection)):
		return errors.New("selection is not valid JSON")
	}
	return nil
}

func (e AuditEntry) selection() string {
	if e.Selection == "" {
		return "{}"
	}
	return clean(e.Selection)
}

func (e AuditEntry) at() time.Time {
	if e.At.IsZero() {
		return time.Now()
	}
	return e.At
}

func (c AuditCounts) text() (string, error) {
	if len(c) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(map[string]int64(c))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Begin writes e as a started row, committed before it returns, and
// returns the row's id for AuditLog.End. An action calls it before it changes
// anything; when it fails, the action must not go on (an unaudited change
// is what the audit exists to prevent). It fails for an entry without
// Actor, Via or Action, or whose Selection is not JSON.
func (a AuditLog) Begin(ctx context.Context, e AuditEntry) (int64, error) {
	return a.db.auditInsert(ctx, "begin audit", e, AuditStarted, nil, "", time.Time{})
}

// Record writes one row that is already closed, with its outcome,
// counts and detail, and returns its id: for what has no duration, a
// refusal above all (outcome AuditRefused), or an action audited after the
// fact. Outcome must be one of AuditOK, AuditFailed, AuditInterrupted,
// AuditRefused; the row's Ended is its At.
func (a AuditLog) Record(ctx context.Context, e AuditEntry, outcome string, counts AuditCounts, detail string) (int64, error) {
	if !slices.Contains(auditOutcomes, outcome) {
		return 0, fmt.Errorf("record audit: outcome %q: want one of %s", outcome, strings.Join(auditOutcomes, ", "))
	}
	e.At = e.at()
	return a.db.auditInsert(ctx, "record audit", e, outcome, counts, detail, e.At)
}

func (db *DB) auditInsert(ctx context.Context, op string, e AuditEntry, outcome string, counts AuditCounts, detail string, ended time.Time) (int64, error) {
	if err := db.open(); err != nil {
		return 0, err
	}
	if err := checkAuditEntry(e); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	ct, err := counts.text()
	if err != nil {
		return 0, fmt.Errorf("%s: counts: %w", op, err)
	}
	var endedAt any
	if !ended.IsZero() {
		endedAt = formatTime(ended)
	}
	var id int64
	err = db.inTx(ctx, func(tx *sql.Tx) error {
		id, err = db.auditInsertTx(ctx, tx, e, outcome, ct, detail, endedAt)
		return err
	})
	if err != nil {
		return 0, db.fail(op, err)
	}
	return id, nil
}

// auditInsertTx inserts a checked entry in tx; counts is its JSON text,
// ended its ended_at (nil while started).
func (db *DB) auditInsertTx(ctx context.Context, tx *sql.Tx, e AuditEntry, outcome, counts, detail string, ended any) (int64, error) {
	var id int64
	err := tx.QueryRowContext(ctx, db.dialect.Rebind(`INSERT INTO spool_audit
    (at, actor, role, via, action, selection, counts, outcome, detail, ended_at, host, pid, task_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`),
		formatTime(e.at()), clean(e.Actor), clean(e.Role), clean(e.Via), clean(e.Action), e.selection(),
		counts, outcome, clean(detail), ended, clean(e.Host), e.PID, nullInt(e.Task)).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("insert audit row: %w", err)
	}
	return id, nil
}

// auditOnce runs insert, a statement that writes one row or none (an
// InsertNew), and, when it wrote one and e has an Actor, writes e as a
// closed row with outcome ok in the same transaction: the audit of a
// change that is one statement (a ledger bound), which is then recorded
// with its row or not at all.
func (db *DB) auditOnce(ctx context.Context, e AuditEntry, insert string, args ...any) error {
	return db.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, insert, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 || e.Actor == "" {
			return err
		}
		if err := checkAuditEntry(e); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		now := e.at()
		e.At = now
		_, err = db.auditInsertTx(ctx, tx, e, AuditOK, "{}", "", formatTime(now))
		return err
	})
}

// End records the outcome of row id, which AuditLog.Begin wrote, with the
// action's counts and detail (why it failed, a summary), and the time it
// ended (now). Outcome is one of AuditOK, AuditFailed, AuditInterrupted,
// AuditRefused. A row is closed once: AuditLog.End on a row that has its
// outcome already fails with ErrAuditClosed, except on one marked
// AuditInterrupted, whose outcome the action itself may still correct
// (a later run took it for killed while it was not).
func (a AuditLog) End(ctx context.Context, id int64, outcome string, counts AuditCounts, detail string) error {
	op := fmt.Sprintf("end audit %d", id)
	if err := a.db.open(); err != nil {
		return err
	}
	if !slices.Contains(auditOutcomes, outcome) {
		return fmt.Errorf("%s: outcome %q: want one of %s", op, outcome, strings.Join(auditOutcomes, ", "))
	}
	ct, err := counts.text()
	if err != nil {
		return fmt.Errorf("%s: counts: %w", op, err)
	}
	res, err := a.db.sql.ExecContext(ctx, a.db.dialect.Rebind(`UPDATE spool_audit SET outcome = ?, counts = ?, detail = ?, ended_at = ?
WHERE id = ? AND outcome IN ('started', 'interrupted')`), outcome, ct, clean(detail), formatTime(time.Now()), id)
	if err != nil {
		return a.db.fail(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return a.db.fail(op, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", op, ErrAuditClosed)
	}
	return nil
}

// AuditQuery selects rows for AuditLog.List. The zero value is every row.
type AuditQuery struct {
	// Since keeps the rows whose At is at or after it, Until those whose
	// At is before it; zero for no bound.
	Since time.Time
	Until time.Time
	// Actor keeps the rows of this actor, compared without case as the
	// identities are (task.SamePerson): "token:olga" is that token's rows;
	// a name without a realm, "olga", is hers in every realm
	// (token:olga, os:olga) and a row written with the bare name. Empty
	// for all.
	Actor string
	// After keeps the rows whose ID is larger (a cursor: the last ID of
	// the previous page); 0 for all.
	After int64
	// Outcome keeps the rows with this outcome (AuditStarted for the
	// rows still open); empty for all.
	Outcome string
	// Action keeps the rows of this action; empty for all.
	Action string
	// Before keeps the rows whose ID is smaller (a cursor going back);
	// 0 for all.
	Before int64
	// Limit is the most rows returned, the first ones in ID order (the
	// last ones with Newest); 0 or less for no limit.
	Limit int
	// Newest returns the rows newest first, so that Limit keeps the
	// latest (the HTTP API's pages of the audit).
	Newest bool
}

// List returns the rows q selects, oldest first (newest first with
// q.Newest): in ID order, which
// is the order they were written in (and on PostgreSQL and MariaDB, where
// writers run side by side, the order their ids were drawn in), not by
// the writers' clocks. It only reads: it works on a ledger opened
// read-only.
func (a AuditLog) List(ctx context.Context, q AuditQuery) ([]AuditRow, error) {
	if err := a.db.open(); err != nil {
		return nil, err
	}
	query := `SELECT id, at, actor, role, via, action, selection, counts, outcome, detail, ended_at, host, pid, task_id
FROM spool_audit WHERE id > ?`
	args := []any{q.After}
	if !q.Since.IsZero() {
		query += ` AND at >= ?`
		args = append(args, formatTime(q.Since))
	}
	if !q.Until.IsZero() {
		query += ` AND at < ?`
		args = append(args, formatTime(q.Until))
	}
	if q.Actor != "" {
		// LOWER on both sides: SQLite's LIKE ignores ASCII case and
		// PostgreSQL's does not; this way every engine compares alike.
		query += ` AND (LOWER(actor) = LOWER(?)`
		args = append(args, q.Actor)
		if !strings.Contains(q.Actor, ":") {
			query += ` OR LOWER(actor) LIKE LOWER(?) ESCAPE '!'`
			args = append(args, "%:"+likeEscaper.Replace(q.Actor))
		}
		query += `)`
	}
	if q.Outcome != "" {
		query += ` AND outcome = ?`
		args = append(args, q.Outcome)
	}
	if q.Action != "" {
		query += ` AND action = ?`
		args = append(args, q.Action)
	}
	if q.Before > 0 {
		query += ` AND id < ?`
		args = append(args, q.Before)
	}
	if q.Newest {
		query += ` ORDER BY id DESC`
	} else {
		query += ` ORDER BY id`
	}
	if q.Limit > 0 {
		query += fmt.Sprintf(` LIMIT %d`, q.Limit)
	}
	rows, err := a.db.sql.QueryContext(ctx, a.db.dialect.Rebind(query), args...)
	if err != nil {
		return nil, a.db.fail("list audit", err)
	}
	defer rows.Close()
	var out []AuditRow
	for rows.Next() {
		var (
			r               AuditRow
			at, sel, counts string
			ended           sql.NullString
			task            sql.NullInt64
			pid             int64
		)
		if err := rows.Scan(&r.ID, &at, &r.Actor, &r.Role, &r.Via, &r.Action, &sel, &counts, &r.Outcome, &r.Detail,
			&ended, &r.Host, &pid, &task); err != nil {
			return nil, a.db.fail("list audit", err)
		}
		r.PID, r.Task, r.Selection = int(pid), task.Int64, sel
		if r.At, err = parseTime("audit.at", at); err != nil {
			return nil, fmt.Errorf("list audit: row %d: %w", r.ID, err)
		}
		if ended.Valid {
			if r.Ended, err = parseTime("audit.ended_at", ended.String); err != nil {
				return nil, fmt.Errorf("list audit: row %d: %w", r.ID, err)
			}
		}
		if err := json.Unmarshal([]byte(counts), &r.Counts); err != nil {
			return nil, fmt.Errorf("list audit: row %d: counts: %w", r.ID, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, a.db.fail("list audit", err)
	}
	return out, nil
}

// likeEscaper quotes LIKE's wildcards with '!', an escape character
// every engine reads alike (MariaDB takes a backslash in a literal as an
// escape of its own).
var likeEscaper = strings.NewReplacer("!", "!!", "%", "!%", "_", "!_")

// auditSelection is the JSON object {key: value}.
func auditSelection(key, value string) string {
	b, _ := json.Marshal(map[string]string{key: clean(value)}) // a map of strings always marshals
	return string(b)
}

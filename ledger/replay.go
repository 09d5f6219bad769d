package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// A replay is recorded as an intent before any file moves, so that one
// killed at any instant can be finished: see package replay and
// docs/DESIGN.md, "Replay".

// ReplayLog is the ledger's replays of dead letters (tables
// replay_intents, replay_items and replays): an intent committed with
// every file it will move before the first one moves, so that a killed
// replay is finished, never redone or lost, and the log of the files
// moved back to inbox/, which is only ever appended to. Reached by
// DB.Replays.
type ReplayLog struct{ db *DB }

// Replays returns the ledger's replay log.
func (db *DB) Replays() ReplayLog { return ReplayLog{db} }

// Replay intent states, as stored in replay_intents.state.
const (
	// IntentPending: committed; files may still sit in error/ under their
	// own names.
	IntentPending = "pending"
	// IntentStaged: every selected file has been renamed to its staging name
	// in error/ (or has already moved on to inbox/).
	IntentStaged = "staged"
	// IntentDone: every file moved, and each has its replay record.
	IntentDone = "done"
)

// ReplayIntent is a replay as committed before its first move.
type ReplayIntent struct {
	ID      int64
	By      string
	Note    string
	Created time.Time
	State   string
	Items   []ReplayItem
}

// ReplayItem is one file of a replay intent.
type ReplayItem struct {
	// Idx numbers the item within its intent; it names the file's staging
	// name in error/.
	Idx int
	// File is the dead letter's name in error/ when the replay was asked.
	File string
	// Ino is its inode number, which every rename keeps.
	Ino uint64
}

// beginReplay commits a replay intent, in state pending, with its items,
// as the move of a task's chunk that link says (Tasks.BeginChunk,
// Tasks.Start), and returns its id.
func (db *DB) beginReplay(ctx context.Context, link *taskLink, by, note string, at time.Time, items []ReplayItem) (int64, error) {
	if err := db.open(); err != nil {
		return 0, err
	}
	if by == "" {
		return 0, errors.New("begin replay: by is required")
	}
	var id int64
	err := db.inTx(ctx, func(tx *sql.Tx) error {
		task, err := db.link(ctx, tx, link, at)
		if err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, db.dialect.Rebind(`INSERT INTO replay_intents (by_user, note, created_at, state, task_id)
VALUES (?, ?, ?, 'pending', ?) RETURNING id`), clean(by), nullString(clean(note)), formatTime(at), task).Scan(&id); err != nil {
			return fmt.Errorf("insert intent: %w", err)
		}
		ins, err := tx.PrepareContext(ctx, db.dialect.Rebind(`INSERT INTO replay_items (intent_id, idx, file, ino) VALUES (?, ?, ?, ?)`))
		if err != nil {
			return fmt.Errorf("insert items: %w", err)
		}
		defer ins.Close()
		for _, it := range items {
			// file is kept exact, not cleaned: the replay finds the file by it.
			if _, err := ins.ExecContext(ctx, id, it.Idx, it.File, nullIno(it.Ino)); err != nil {
				return fmt.Errorf("insert item %s: %w", clean(it.File), err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, db.fail("begin replay", err)
	}
	return id, nil
}

// Stage marks the intent staged: every one of its files now sits in
// error/ under its staging name, or has moved on to inbox/.
func (rl ReplayLog) Stage(ctx context.Context, id int64) error {
	if err := rl.db.open(); err != nil {
		return err
	}
	if _, err := rl.db.sql.ExecContext(ctx, rl.db.dialect.Rebind(`UPDATE replay_intents SET state = 'staged' WHERE id = ? AND state = 'pending'`), id); err != nil {
		return rl.db.fail(fmt.Sprintf("stage replay %d", id), err)
	}
	return nil
}

// Finish records one replay row per moved file and marks the intent
// done, in one transaction. Replays holds the moved files; items not among
// them (gone from the queue by hand) get no record. The dead letters whose
// file was edited to a new inode before it was replayed are retired from
// the dead-letter index in the same transaction (retireReplaced).
func (rl ReplayLog) Finish(ctx context.Context, id int64, replays []Replay, at time.Time) error {
	if err := rl.db.open(); err != nil {
		return err
	}
	err := rl.db.inTx(ctx, func(tx *sql.Tx) error {
		// Marked first: of two runs finishing the same intent at once, the
		// second waits on the row (PostgreSQL) or the write lock (SQLite),
		// then finds it done and records nothing.
		res, err := tx.ExecContext(ctx, rl.db.dialect.Rebind(`UPDATE replay_intents SET state = 'done', finished_at = ?
WHERE id = ? AND state <> 'done'`), formatTime(at), id)
		if err != nil {
			return fmt.Errorf("mark done: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // finished by another run meanwhile, or unknown
		}
		// A file edited in error/ (a new inode) leaves its dead-letter
		// record behind, which the replay of its inode does not retire;
		// retired before the rows are in (see retireReplaced).
		if len(replays) > 0 {
			moved := make([]movedFile, len(replays))
			for i, r := range replays {
				moved[i] = movedFile{name: r.File, ino: r.Ino}
			}
			if err := rl.db.retireReplaced(ctx, tx, ExitReplayed, replays[0].By, at, moved, 0); err != nil {
				return err
			}
		}
		ins, err := tx.PrepareContext(ctx, rl.db.dialect.Rebind(`INSERT INTO replays (file, new_name, ino, by_user, note, at, intent_id)
VALUES (?, ?, ?, ?, ?, ?, ?)`))
		if err != nil {
			return fmt.Errorf("insert replays: %w", err)
		}
		defer ins.Close()
		for _, r := range replays {
			if _, err := ins.ExecContext(ctx, clean(r.File), clean(r.NewName), nullIno(r.Ino), clean(r.By),
				nullString(clean(r.Note)), formatTime(r.At), id); err != nil {
				return fmt.Errorf("insert replay of %s: %w", clean(r.File), err)
			}
		}
		var items int
		if err := tx.QueryRowContext(ctx, rl.db.dialect.Rebind(`SELECT COUNT(*) FROM replay_items WHERE intent_id = ?`), id).Scan(&items); err != nil {
			return fmt.Errorf("count items: %w", err)
		}
		return rl.db.countChunk(ctx, tx, "replay_intents", id, len(replays), items-len(replays), at)
	})
	if err != nil {
		return rl.db.fail(fmt.Sprintf("finish replay %d", id), err)
	}
	return nil
}

// Unfinished returns the intents not yet done, oldest first, with
// their items in idx order.
func (rl ReplayLog) Unfinished(ctx context.Context) ([]ReplayIntent, error) {
	out, err := queryAll(ctx, rl.db, "list unfinished replays", `SELECT id, by_user, note, created_at, state FROM replay_intents
WHERE state <> 'done' ORDER BY id`, nil, func(rows *sql.Rows) (ReplayIntent, error) {
		var (
			in      ReplayIntent
			note    sql.NullString
			created string
		)
		if err := rows.Scan(&in.ID, &in.By, &note, &created, &in.State); err != nil {
			return in, err
		}
		in.Note = note.String
		var err error
		in.Created, err = parseTime("replay_intents.created_at", created)
		return in, err
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Items, err = rl.db.replayItems(ctx, out[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (db *DB) replayItems(ctx context.Context, id int64) ([]ReplayItem, error) {
	op := fmt.Sprintf("list items of replay %d", id)
	rows, err := db.sql.QueryContext(ctx, db.dialect.Rebind(`SELECT idx, file, ino FROM replay_items WHERE intent_id = ? ORDER BY idx`), id)
	if err != nil {
		return nil, db.fail(op, err)
	}
	defer rows.Close()
	var out []ReplayItem
	for rows.Next() {
		var (
			it  ReplayItem
			ino sql.NullInt64
		)
		if err := rows.Scan(&it.Idx, &it.File, &ino); err != nil {
			return nil, db.fail(op, err)
		}
		it.Ino = uint64(ino.Int64)
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, db.fail(op, err)
	}
	return out, nil
}

package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// This file holds how the dead-letter index forgets a file that left
// error/ in a way its inode does not show (table dead_letter_exits,
// migration 021), and what its readers and spool fsck read to check it
// against error/ as it is.
//
// A replay or a discard moves a dead letter out of error/ by name and
// records the inode it moved: the record of that inode is then no longer
// current (currentDeadLetter). A file edited in error/ first (sed -i, an
// editor: a new inode) leaves its record behind, and a file removed by
// hand leaves it too. The first is retired here when the replay or
// discard is finished (retireReplaced), in the same transaction; the
// second only fsck can tell, and --repair retires it (DeadLetters.Retire).
// Meanwhile the readers leave such a record out by checking it against
// error/ (FileCheck), so that neither is ever listed.

// DeadLetters is the ledger's dead-letter index as its readers and spool
// fsck see it (the dead-letter deliveries, and table dead_letter_exits):
// each dead letter's record by its file's inode, which of them are still
// current (in error/, neither replayed, discarded nor retired), pages
// and groups of them for reports, and the retiring of the ones whose file
// left error/ unseen. A record is never deleted by these; retiring one
// only adds its exit. Reached by DB.DeadLetters.
type DeadLetters struct{ db *DB }

// DeadLetters returns the ledger's dead-letter index.
func (db *DB) DeadLetters() DeadLetters { return DeadLetters{db} }

// DeadLetterExit is how a dead letter's file left error/, as an exit of
// the dead-letter index records it.
type DeadLetterExit string

// The exits of a dead letter.
const (
	// ExitReplayed: a file of its name, not of its inode (it was edited
	// to a new one), was replayed after it was recorded.
	ExitReplayed DeadLetterExit = "replayed"
	// ExitDiscarded: the same, discarded.
	ExitDiscarded DeadLetterExit = "discarded"
	// ExitRemoved: spool fsck --repair found its file gone from error/,
	// neither replayed nor discarded: removed by hand.
	ExitRemoved DeadLetterExit = "removed"
)

// DeadLetterFile is a current dead letter as the ledger recorded it: what
// a check of its file against error/ needs, and what the groups count.
type DeadLetterFile struct {
	// ID is the record's id.
	ID int64
	// File is the name it had in inbox/: its name in error/, or that name
	// with the collision suffix a move into error/ may have added.
	File string
	// Ino is its inode number; 0 when it was recorded before inodes were.
	Ino uint64
	// At is when it was dead-lettered.
	At time.Time
	// Reason, Field and Detail are the record's.
	Reason, Field, Detail string
}

// FileCheck reports, for each of files, whether its file is still in
// error/: present[i] for files[i], len(present) == len(files). The ledger
// calls it with no query of its own open, so it may read the ledger.
type FileCheck func(ctx context.Context, files []DeadLetterFile) (present []bool, err error)

// currentChunk is how many current dead letters DeadLetters.Current reads
// in one query.
const currentChunk = 4096

// Current calls fn with every current dead letter (those
// DeadLetters.Page lists without a Check), newest first, a chunk at a time,
// each chunk's query closed before fn is called: so fn may check the
// chunk against error/ and read the ledger. A dead letter recorded while
// it runs may or may not be seen. It only reads.
func (dls DeadLetters) Current(ctx context.Context, fn func([]DeadLetterFile) error) error {
	if err := dls.db.open(); err != nil {
		return err
	}
	where, args := deadLetterFilter(DeadLetterQuery{})
	for before := int64(0); ; {
		w, a := where, args
		if before > 0 {
			w += ` AND d.id < ?`
			a = append(slices.Clip(a), before)
		}
		files, err := dls.db.currentChunk(ctx, fmt.Sprintf(`SELECT d.id, d.file, d.ino, d.at, d.reason, d.field, d.detail
FROM deliveries d WHERE %s ORDER BY d.id DESC LIMIT %d`, w, currentChunk), a)
		if err != nil {
			return err
		}
		if len(files) > 0 {
			if err := fn(files); err != nil {
				return err
			}
		}
		if len(files) < currentChunk {
			return nil
		}
		before = files[len(files)-1].ID
	}
}

func (db *DB) currentChunk(ctx context.Context, query string, args []any) ([]DeadLetterFile, error) {
	rows, err := db.sql.QueryContext(ctx, db.dialect.Rebind(query), args...)
	if err != nil {
		return nil, db.fail("read dead letters", err)
	}
	defer rows.Close()
	var out []DeadLetterFile
	for rows.Next() {
		var (
			f             DeadLetterFile
			ino           sql.NullInt64
			at            string
			field, detail sql.NullString
		)
		if err := rows.Scan(&f.ID, &f.File, &ino, &at, &f.Reason, &field, &detail); err != nil {
			return nil, db.fail("read dead letters", err)
		}
		f.Ino, f.Field, f.Detail = uint64(ino.Int64), field.String, detail.String // ino: see nullIno
		if f.At, err = parseTime("deliveries.at", at); err != nil {
			return nil, fmt.Errorf("read dead letters: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, db.fail("read dead letters", err)
	}
	return out, nil
}

// Retire records that the files of the dead-letter records ids
// left error/ as how says, by by at at, so that the dead-letter index no
// longer lists them; the records themselves stay, as history. A record
// retired already keeps its first exit. It is for spool fsck --repair.
func (dls DeadLetters) Retire(ctx context.Context, ids []int64, how DeadLetterExit, by string, at time.Time) error {
	if err := dls.db.open(); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	err := dls.db.inTx(ctx, func(tx *sql.Tx) error {
		return dls.db.insertExits(ctx, tx, ids, how, by, at)
	})
	if err != nil {
		return dls.db.fail("retire dead letters", err)
	}
	return nil
}

func (db *DB) insertExits(ctx context.Context, tx *sql.Tx, ids []int64, how DeadLetterExit, by string, at time.Time) error {
	switch how {
	case ExitReplayed, ExitDiscarded, ExitRemoved:
	default:
		return fmt.Errorf("dead-letter exit %q", how)
	}
	ins, err := tx.PrepareContext(ctx, db.dialect.Rebind(db.dialect.InsertNew(
		`INSERT INTO dead_letter_exits (delivery_id, how, by_user, at) VALUES (?, ?, ?, ?)`, "delivery_id", "")))
	if err != nil {
		return fmt.Errorf("insert exits: %w", err)
	}
	defer ins.Close()
	for _, id := range ids {
		if _, err := ins.ExecContext(ctx, id, string(how), clean(by), formatTime(at)); err != nil {
			return fmt.Errorf("insert exit of dead letter %d: %w", id, err)
		}
	}
	return nil
}

// movedFile is a file a replay or discard moved out of error/: the name it
// had there and its inode.
type movedFile struct {
	name string
	ino  uint64
}

// retireReplaced retires, in tx, the dead letters whose file was edited to
// a new inode and then moved out of error/ by a replay or discard (how) at
// at: for each moved file whose inode no dead-letter record has, the
// current records made under its very name before at. A record whose file
// got a collision suffix in error/ ("a~2.json" for a.json) is not tied to
// it here, nor are records when a name has more of them than moved files
// without a record (two dead letters of one name sat in error/, and only
// one was edited): which of them moved cannot be told without error/, and
// a record retired wrongly would hide a file still there. The readers'
// check leaves such a record out meanwhile, and fsck --repair retires it
// (dead-letter-replaced).
//
// A moved inode counts as a record's only while that record is current
// but for this very move: a file edited in error/ may get the inode of a
// file that left the queue before (the file system hands freed numbers
// out again), and the retired record under it must not stand for the
// edit. So replays call it before they insert their rows, and a discard
// passes its batch (discardBatch, 0 for a replay), whose rows exist from
// its start.
func (db *DB) retireReplaced(ctx context.Context, tx *sql.Tx, how DeadLetterExit, by string, at time.Time, moved []movedFile, discardBatch int64) error {
	// The moved inodes that have a current dead-letter record: theirs is
	// retired by the inode.
	recorded := map[uint64]bool{}
	var inos []any
	for _, m := range moved {
		if m.ino != 0 {
			inos = append(inos, nullIno(m.ino))
		}
	}
	for chunk := range slices.Chunk(inos, rowsPerInsert) {
		rows, err := tx.QueryContext(ctx, db.dialect.Rebind(`SELECT DISTINCT d.ino FROM deliveries d
WHERE d.outcome = 'dead-letter' AND d.ino IN (`+placeholders(len(chunk))+`)
AND NOT EXISTS (SELECT 1 FROM dead_letter_exits e WHERE e.delivery_id = d.id)
AND NOT EXISTS (SELECT 1 FROM deliveries n WHERE n.outcome = 'dead-letter' AND n.ino = d.ino AND n.id > d.id)
AND NOT EXISTS (SELECT 1 FROM replays r WHERE r.ino = d.ino AND r.at >= d.at)
AND NOT EXISTS (SELECT 1 FROM discards x JOIN discard_batches b ON b.id = x.batch_id
    WHERE x.ino = d.ino AND b.created_at >= d.at AND x.batch_id <> ?)`), append(slices.Clip(chunk), discardBatch)...)
		if err != nil {
			return fmt.Errorf("retire replaced dead letters: %w", err)
		}
		for rows.Next() {
			var ino int64
			if err := rows.Scan(&ino); err != nil {
				rows.Close()
				return fmt.Errorf("retire replaced dead letters: %w", err)
			}
			recorded[uint64(ino)] = true // stored with the same bits; see nullIno
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return fmt.Errorf("retire replaced dead letters: %w", err)
		}
	}
	edited := map[string]int{} // moved files without a record, by name
	var names []any
	for _, m := range moved {
		if m.ino == 0 || recorded[m.ino] {
			continue // moved before inodes were recorded, or retired by its inode
		}
		name := clean(m.name)
		if edited[name] == 0 {
			names = append(names, name)
		}
		edited[name]++
	}
	if len(names) == 0 {
		return nil
	}
	byName := map[string][]int64{}
	for chunk := range slices.Chunk(names, rowsPerInsert) {
		q := `SELECT d.id, d.file, d.ino FROM deliveries d WHERE d.outcome = 'dead-letter' AND d.file IN (` + placeholders(len(chunk)) +
			`) AND d.at <= ? AND ` + currentDeadLetter
		rows, err := tx.QueryContext(ctx, db.dialect.Rebind(q), append(slices.Clip(chunk), formatTime(at))...)
		if err != nil {
			return fmt.Errorf("retire replaced dead letters: %w", err)
		}
		for rows.Next() {
			var (
				id   int64
				file string
				ino  sql.NullInt64
			)
			if err := rows.Scan(&id, &file, &ino); err != nil {
				rows.Close()
				return fmt.Errorf("retire replaced dead letters: %w", err)
			}
			if ino.Valid && recorded[uint64(ino.Int64)] {
				continue // its own file moved too, under another name: retired by the inode
			}
			byName[file] = append(byName[file], id)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return fmt.Errorf("retire replaced dead letters: %w", err)
		}
	}
	var ids []int64
	for name, recs := range byName {
		if len(recs) <= edited[name] {
			ids = append(ids, recs...)
		}
	}
	slices.Sort(ids)
	return db.insertExits(ctx, tx, ids, how, by, at)
}

// ErrorExit is a file moved out of error/ on purpose: by a replay or a
// discard.
type ErrorExit struct {
	// How is ExitReplayed or ExitDiscarded.
	How DeadLetterExit
	// File is its name in error/; Ino its inode (0 when unknown).
	File string
	Ino  uint64
	// At is when the replay was recorded or the discard begun.
	At time.Time
}

// ErrorExits returns every replay and discard of a file of error/, in no
// particular order: spool fsck tells by them a dead letter whose file was
// edited and then moved out of error/ from one removed by hand.
func (dls DeadLetters) ErrorExits(ctx context.Context) ([]ErrorExit, error) {
	return queryAll(ctx, dls.db, "list replays and discards", `SELECT 'replayed', file, ino, at FROM replays
UNION ALL
SELECT 'discarded', x.file, x.ino, b.created_at FROM discards x JOIN discard_batches b ON b.id = x.batch_id`, nil,
		func(rows *sql.Rows) (ErrorExit, error) {
			var (
				e       ErrorExit
				how, at string
				ino     sql.NullInt64
			)
			if err := rows.Scan(&how, &e.File, &ino, &at); err != nil {
				return e, err
			}
			e.How, e.Ino = DeadLetterExit(how), uint64(ino.Int64)
			var err error
			e.At, err = parseTime("replays.at", at)
			return e, err
		})
}

// Names returns, for each of inos that has dead-letter records,
// the names they were recorded under (the name each file had in inbox/):
// a file of error/ whose inode has a record under its name is that
// record's, and one whose inode has none is a copy or an edit of a
// record's file. It only reads.
func (dls DeadLetters) Names(ctx context.Context, inos []uint64) (map[uint64][]string, error) {
	if err := dls.db.open(); err != nil {
		return nil, err
	}
	out := map[uint64][]string{}
	args := make([]any, 0, len(inos))
	for _, ino := range inos {
		if ino != 0 {
			args = append(args, nullIno(ino))
		}
	}
	for chunk := range slices.Chunk(args, rowsPerInsert) {
		rows, err := dls.db.sql.QueryContext(ctx, dls.db.dialect.Rebind(`SELECT ino, file FROM deliveries
WHERE outcome = 'dead-letter' AND ino IN (`+placeholders(len(chunk))+`)`), chunk...)
		if err != nil {
			return nil, dls.db.fail("dead-letter names", err)
		}
		for rows.Next() {
			var (
				ino  int64
				file string
			)
			if err := rows.Scan(&ino, &file); err != nil {
				rows.Close()
				return nil, dls.db.fail("dead-letter names", err)
			}
			out[uint64(ino)] = append(out[uint64(ino)], file) // stored with the same bits; see nullIno
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, dls.db.fail("dead-letter names", err)
		}
	}
	return out, nil
}

// StillCurrent returns which of the dead-letter records ids are current
// now: spool fsck reads it again for a record whose file it did not find,
// since a replay may have moved the file meanwhile. It only reads.
func (dls DeadLetters) StillCurrent(ctx context.Context, ids []int64) (map[int64]bool, error) {
	if err := dls.db.open(); err != nil {
		return nil, err
	}
	out := map[int64]bool{}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	for chunk := range slices.Chunk(args, rowsPerInsert) {
		rows, err := dls.db.sql.QueryContext(ctx, dls.db.dialect.Rebind(`SELECT d.id FROM deliveries d
WHERE d.outcome = 'dead-letter' AND d.id IN (`+placeholders(len(chunk))+`) AND `+currentDeadLetter), chunk...)
		if err != nil {
			return nil, dls.db.fail("read dead letters", err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, dls.db.fail("read dead letters", err)
			}
			out[id] = true
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, dls.db.fail("read dead letters", err)
		}
	}
	return out, nil
}

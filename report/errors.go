package report

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// ReasonUnknown is the reason reported for a file in error/ that the ledger
// has no dead-letter record of, e.g. one an operator dropped in by hand.
const ReasonUnknown = "unknown"

// ErrorRow is one dead letter sitting in error/, with its history.
type ErrorRow struct {
	// File is its name in error/.
	File string
	// Reason is the recorded reason (parse, missing-field, ...), or
	// ReasonUnknown when the ledger has no record of this file.
	Reason string
	// Field names the offending field, when the record has one.
	Field string
	// Detail is the recorded explanation: the parser's message, or the
	// handler's last error.
	Detail string
	// At is when the consumer inspected it; zero when unknown.
	At time.Time

	// Known reports whether the ledger has a record of this file; false
	// exactly when Reason is ReasonUnknown.
	Known bool
	// ByName reports a Known file whose inode has no record, found by its
	// name instead: a dead letter edited in error/ (sed -i, an editor
	// that writes a new file) or copied with its queue to a new inode.
	ByName bool
	// OriginalFile is the name the message had in inbox/ when it was
	// claimed: File without the collision suffix a move into error/ may have
	// added. Empty when unknown.
	OriginalFile string
	// Ino is the file's inode number, the identity that survives renames.
	Ino uint64
	// MsgID is the message's key when the ledger knows it (a valid message
	// its handler failed, or one rejected for another field than a valid
	// key); empty for a message without a valid one.
	MsgID string
	// Attempts is how many times it failed on this delivery: the handler's
	// attempts, or 1 for a poison message, which is dead-lettered at its
	// first inspection without retries; 0 when unknown.
	Attempts int
	// FirstFailure and LastFailure bound those attempts; for a poison
	// message both are At. Zero when unknown.
	FirstFailure, LastFailure time.Time
	// Consumer identifies the consumer that dead-lettered it, as recorded:
	// "<random>-<pid>@<host>". See ParseConsumer.
	Consumer string
	// Previous are the earlier dead-letter records of the same message,
	// oldest first: it was replayed and failed again, once per record.
	Previous []ledger.DeadLetterRecord
	// Replays are the replays of the same message, oldest first.
	Replays []ledger.ReplayRecord
	// PendingOf, for a file without a record that is a pending dead
	// letter (pendingDeadLetters), is where its batch file waits
	// ("inbox/orders.csv"): the run that consumes it records the file,
	// which no replay or discard moves until then. Its Detail says so.
	PendingOf string

	// entry is the file's directory entry, for reading it (ReplayPlan).
	entry queue.Entry
}

// Errors lists every message in error/, sorted by name, with the record the
// ledger holds for it and its history. The record is found by inode,
// because a dead letter may have been stored under a suffixed name; a
// record whose file name does not match is one of an earlier file that had
// the same inode, and does not count.
//
// The history follows the message back through its replays: a replay moves
// the file (same inode) from error/ to inbox/, so the dead letter it
// replayed and the one it became are linked by the replay's names. An
// inode the filesystem reused for an unrelated file does not join the
// chain, because no replay links the two.
func Errors(ctx context.Context, d *queue.Dir, l *ledger.DB) ([]ErrorRow, error) {
	var entries []queue.Entry
	if err := d.List(queue.Error, func(e queue.Entry) error {
		entries = append(entries, e)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("errors report: %w", err)
	}
	slices.SortFunc(entries, func(a, b queue.Entry) int { return strings.Compare(a.Name, b.Name) })
	var replays map[uint64][]ledger.ReplayRecord
	if len(entries) > 0 {
		// One read of the replay log rather than one per file: it is small
		// next to the deliveries, and has no index on ino.
		all, err := l.Replays().List(ctx)
		if err != nil {
			return nil, fmt.Errorf("errors report: %w", err)
		}
		replays = make(map[uint64][]ledger.ReplayRecord)
		for _, r := range all {
			if r.Ino != 0 {
				replays[r.Ino] = append(replays[r.Ino], r)
			}
		}
	}
	rows := make([]ErrorRow, 0, len(entries))
	var unknown []int
	for _, e := range entries {
		recs, err := l.DeadLetters().History(ctx, e.Ino)
		if err != nil {
			return nil, fmt.Errorf("errors report: %s: %w", e.Name, err)
		}
		if rows = append(rows, errorRow(e, recs, replays[e.Ino])); !rows[len(rows)-1].Known {
			unknown = append(unknown, len(rows)-1)
		}
	}
	if len(unknown) > 0 {
		if err := byName(ctx, l, rows, unknown, replays); err != nil {
			return nil, fmt.Errorf("errors report: %w", err)
		}
		pend := newPendingDeadLetters(d)
		for _, i := range unknown {
			r := &rows[i]
			if r.Known {
				continue
			}
			of, ok, err := pend.Of(r.File)
			if err != nil {
				return nil, fmt.Errorf("errors report: %w", err)
			}
			if ok {
				r.PendingOf = of
				r.Detail = (&PendingError{File: r.File, Of: of}).why()
			}
		}
	}
	return rows, nil
}

// byName finds the records of the rows unknown by their inode under their
// names, as InError does from the ledger's side: a file of error/ edited
// in place or copied has a new inode, and is still the dead letter
// recorded under its name, the latest current one (not replayed,
// discarded or found removed) whose inode is no other known file's now. It
// reads the current dead letters once, and the history of each inode
// found.
func byName(ctx context.Context, l *ledger.DB, rows []ErrorRow, unknown []int, replays map[uint64][]ledger.ReplayRecord) error {
	want := make(map[string]bool, len(unknown))
	for _, i := range unknown {
		want[storedName(rows[i].File)] = true
	}
	// The inodes whose records are their files': an edit's new inode may
	// be one an earlier edit freed, which no record of its name holds.
	present := make(map[uint64]bool, len(rows))
	for _, r := range rows {
		if r.Known {
			present[r.Ino] = true
		}
	}
	// Newest first: the first record of a name is its latest.
	latest := map[string]uint64{}
	err := l.DeadLetters().Current(ctx, func(files []ledger.DeadLetterFile) error {
		for _, f := range files {
			if _, seen := latest[f.File]; want[f.File] && !seen && f.Ino != 0 && !present[f.Ino] {
				latest[f.File] = f.Ino
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, i := range unknown {
		e := rows[i].entry
		ino, ok := latest[storedName(e.Name)]
		if !ok {
			continue
		}
		recs, err := l.DeadLetters().History(ctx, ino)
		if err != nil {
			return fmt.Errorf("%s: %w", e.Name, err)
		}
		if r := errorRow(e, recs, replays[ino]); r.Known {
			r.ByName = true
			rows[i] = r
		}
	}
	return nil
}

// errorRow builds the row of the file e from the dead-letter records and
// replays of its inode, both oldest first.
func errorRow(e queue.Entry, recs []ledger.DeadLetterRecord, reps []ledger.ReplayRecord) ErrorRow {
	cur, prev, replayed, ok := lineage(e.Name, recs, reps)
	if !ok {
		return ErrorRow{File: e.Name, Reason: ReasonUnknown, Detail: "no dead-letter record in the ledger", Ino: e.Ino, entry: e}
	}
	r := ErrorRow{
		File: e.Name, Reason: string(cur.Reason), Field: cur.Field, Detail: cur.Detail, At: cur.At,
		Known: true, OriginalFile: cur.File, Ino: e.Ino, MsgID: cur.MsgID,
		Attempts: cur.Attempts, FirstFailure: cur.FirstFailure, LastFailure: cur.LastFailure,
		Consumer: cur.Consumer, Previous: prev, Replays: replayed, entry: e,
	}
	if r.Attempts == 0 {
		r.Attempts, r.FirstFailure, r.LastFailure = 1, cur.At, cur.At
	}
	return r
}

// lineage finds, among the dead-letter records and replays of the inode of
// the file name in error/ (both oldest first), the file's current record,
// the earlier records of the same message and the replays between them,
// oldest first. ok is false when the latest record is not the file's.
//
// It walks back from the current record: the replay that brought the
// message into inbox/ under the name it was claimed with, then the dead
// letter that replay took out of error/, and so on. Each step only looks
// at older rows, so every row joins the chain at most once.
func lineage(name string, recs []ledger.DeadLetterRecord, reps []ledger.ReplayRecord) (cur ledger.DeadLetterRecord, prev []ledger.DeadLetterRecord, replayed []ledger.ReplayRecord, ok bool) {
	if len(recs) == 0 || !sameMessage(name, recs[len(recs)-1].File) {
		return ledger.DeadLetterRecord{}, nil, nil, false
	}
	i, j := len(recs)-1, len(reps)
	for {
		// The replay that put the message into inbox/ under the name it was
		// then claimed with (suffixed if recovery renamed it back).
		j = lastIndex(reps[:j], func(r ledger.ReplayRecord) bool { return sameMessage(recs[i].File, r.NewName) })
		if j < 0 {
			break
		}
		replayed = append(replayed, reps[j])
		// The dead letter that replay took out of error/, under the name it
		// had there.
		k := lastIndex(recs[:i], func(d ledger.DeadLetterRecord) bool { return sameMessage(reps[j].File, d.File) })
		if k < 0 {
			break // replayed from a file the ledger had no record of
		}
		prev = append(prev, recs[k])
		i = k
	}
	slices.Reverse(prev)
	slices.Reverse(replayed)
	return recs[len(recs)-1], prev, replayed, true
}

// lastIndex is the index of the last element of s satisfying f, or -1.
func lastIndex[S ~[]E, E any](s S, f func(E) bool) int {
	for i := len(s) - 1; i >= 0; i-- {
		if f(s[i]) {
			return i
		}
	}
	return -1
}

// sameMessage reports whether stored, a name in a stage, is the file a
// record names: the same name, or that name with the collision suffix
// ("a~2.json" for "a.json") that a move into a stage may add, possibly
// with the stem shortened to fit the file-name limit.
func sameMessage(stored, recorded string) bool {
	// The ledger stores file names made valid UTF-8 without NUL.
	stored = strings.ReplaceAll(strings.ToValidUTF8(stored, "\uFFFD"), "\x00", "\uFFFD")
	if stored == recorded {
		return true
	}
	stem, ok := strings.CutSuffix(stored, ".json")
	if !ok {
		return false
	}
	i := strings.LastIndexByte(stem, '~')
	if i < 0 || i == len(stem)-1 || strings.Trim(stem[i+1:], "0123456789") != "" {
		return false
	}
	return strings.HasPrefix(strings.TrimSuffix(recorded, ".json"), stem[:i])
}

// ParseConsumer splits a consumer identity "<random>-<pid>@<host>" into
// its host and process id; ok is false for an identity of another shape.
func ParseConsumer(id string) (host string, pid int, ok bool) {
	at := strings.LastIndexByte(id, '@')
	if at < 0 {
		return "", 0, false
	}
	dash := strings.LastIndexByte(id[:at], '-')
	if dash < 0 {
		return "", 0, false
	}
	pid, err := strconv.Atoi(id[dash+1 : at])
	if err != nil || pid <= 0 {
		return "", 0, false
	}
	return id[at+1:], pid, true
}

// WriteErrorsCSV writes rows as CSV with the header file,reason; with
// detail it adds the columns field and detail.
func WriteErrorsCSV(w io.Writer, rows []ErrorRow, detail bool) error {
	cw := csv.NewWriter(w)
	header := []string{"file", "reason"}
	if detail {
		header = append(header, "field", "detail")
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, r := range rows {
		rec := []string{r.File, r.Reason}
		if detail {
			rec = append(rec, r.Field, oneLine(r.Detail))
		}
		if err := cw.Write(terminalAll(rec)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// oneLine keeps a CSV record on one line, so `wc -l` and line-based tools
// still count records.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Size is the file's size in bytes, as listed.
func (r ErrorRow) Size() int64 { return r.entry.Size }

// ModTime is the file's modification time, as listed.
func (r ErrorRow) ModTime() time.Time { return time.Unix(0, r.entry.ModTime) }

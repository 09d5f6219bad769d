package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The dead letters as the ledger knows them, for the HTTP API and the
// console (spool serve --auth): a page at a time in keyset order over the
// ledger's indexes, and the groups by reason and error signature, without
// listing error/ (docs/OPERATIONS.md, "The console"). A dead letter is current
// while no later replay, discard or dead letter of its inode is recorded
// and no exit of its own (dead_letter_exits, deadletterexit.go): one
// replayed, discarded, dead-lettered again (its newer record is the current
// one), edited to a new inode and then replayed or discarded, or found
// removed by fsck --repair is not listed. A file removed from error/ by
// hand, which the ledger cannot know of, is left out by the caller's
// FileCheck, which looks for each listed record's file in error/ by name
// and inode (report.InError does).

// DeadLetterQuery selects a page of current dead letters for
// DeadLetters.Page. The zero value is the first page of all of them.
type DeadLetterQuery struct {
	// Reason keeps the dead letters of this reason; empty for all.
	Reason string
	// Text keeps those whose file name, msg_id, field or detail contains
	// it (a plain substring, no pattern, without case); empty for all.
	Text string
	// Detail keeps those whose detail contains it (a plain substring,
	// without case, as a task's detail_match "(?i)" of it selects); empty
	// for all.
	Detail string
	// Since and Until bound the time of dead-lettering, Since included and
	// Until excluded; zero for no bound.
	Since, Until time.Time
	// Before is the cursor: keep the records whose ID is below it (the
	// Next of the previous page); 0 for the first page.
	Before int64
	// Limit is the page's size, 1 to MaxDeadLetterPage; 0 or less is
	// DefaultDeadLetterPage.
	Limit int
	// Check, when set, keeps only the dead letters whose file it finds in
	// error/; nil lists every current record.
	Check FileCheck
}

// Page sizes of DeadLetters.Page.
const (
	DefaultDeadLetterPage = 50
	MaxDeadLetterPage     = 500
)

// pageExamined bounds, as a multiple of the page's size, the records one
// DeadLetters.Page reads when its Check leaves records out, so that a page
// stays a bounded read however many records have lost their file: it
// then returns a short page (possibly empty) with the cursor after the
// last record read. fsck reports such records and --repair retires them.
const pageExamined = 10

// currentDeadLetter is the condition that keeps a dead-letter row d whose
// file has not left error/ as far as the ledger knows: no exit of its own,
// and no later dead letter, replay or discard of its inode (each found by
// an index on ino; the exit by its key).
const currentDeadLetter = `NOT EXISTS (SELECT 1 FROM dead_letter_exits e WHERE e.delivery_id = d.id) AND (d.ino IS NULL OR (
    NOT EXISTS (SELECT 1 FROM deliveries n WHERE n.outcome = 'dead-letter' AND n.ino = d.ino AND n.id > d.id)
    AND NOT EXISTS (SELECT 1 FROM replays r WHERE r.ino = d.ino AND r.at >= d.at)
    AND NOT EXISTS (SELECT 1 FROM discards x JOIN discard_batches b ON b.id = x.batch_id
        WHERE x.ino = d.ino AND b.created_at >= d.at)))`

// likeEscape makes s a LIKE pattern matching s anywhere, with ! as the
// escape character (a backslash is one in MariaDB's string literals).
func likeEscape(s string) string {
	return "%" + likeLiteral(clean(s)) + "%"
}

// likeLiteral is s in a LIKE pattern with ! as the escape character
// (ESCAPE '!'): its %, _ and ! match themselves.
func likeLiteral(s string) string {
	return strings.NewReplacer(`!`, `!!`, `%`, `!%`, `_`, `!_`).Replace(s)
}

// deadLetterFilter is the WHERE clause of q's filters on d, and its
// arguments, without the cursor.
func deadLetterFilter(q DeadLetterQuery) (string, []any) {
	where := `d.outcome = 'dead-letter'`
	var args []any
	if q.Reason != "" {
		where += ` AND d.reason = ?`
		args = append(args, clean(q.Reason))
	}
	if !q.Since.IsZero() {
		where += ` AND d.at >= ?`
		args = append(args, formatTime(q.Since))
	}
	if !q.Until.IsZero() {
		where += ` AND d.at < ?`
		args = append(args, formatTime(q.Until))
	}
	if q.Text != "" {
		p := likeEscape(q.Text)
		where += ` AND (LOWER(d.file) LIKE LOWER(?) ESCAPE '!' OR LOWER(d.msg_id) LIKE LOWER(?) ESCAPE '!'
    OR LOWER(d.field) LIKE LOWER(?) ESCAPE '!' OR LOWER(d.detail) LIKE LOWER(?) ESCAPE '!')`
		args = append(args, p, p, p, p)
	}
	if q.Detail != "" {
		// LOWER on both sides: LIKE ignores ASCII case on SQLite and
		// MariaDB's default collation, not on PostgreSQL.
		where += ` AND LOWER(d.detail) LIKE LOWER(?) ESCAPE '!'`
		args = append(args, likeEscape(q.Detail))
	}
	return where + ` AND ` + currentDeadLetter, args
}

// Page returns the current dead letters q selects, newest first
// (by record id, the ledger's commit order), at most q.Limit of them, and
// the cursor of the next page: the Before of the query that continues it,
// 0 when this page is the last. Each read is one indexed query, whatever
// the number of dead letters. With q.Check, the records whose file it does
// not find in error/ are left out, and more are read to fill the page, up
// to pageExamined times its size: past that the page is returned short,
// with the cursor after the last record read. It only reads.
func (dls DeadLetters) Page(ctx context.Context, q DeadLetterQuery) ([]DeadLetterRecord, int64, error) {
	if err := dls.db.open(); err != nil {
		return nil, 0, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultDeadLetterPage
	}
	limit = min(limit, MaxDeadLetterPage)
	fetch := limit + 1 // one more tells whether a next page exists
	if q.Check != nil {
		fetch = max(fetch, 128) // fewer round trips past records left out
	}
	where, args := deadLetterFilter(q)
	cols := "d." + strings.ReplaceAll(strings.Join(strings.Fields(deadLetterColumns), " "), ", ", ", d.")
	var (
		out      []DeadLetterRecord
		examined int
	)
	for before := q.Before; ; {
		w, a := where, args
		if before > 0 {
			w += ` AND d.id < ?`
			a = append(slices.Clip(a), before)
		}
		recs, err := dls.db.deadLetterRecords(ctx, fmt.Sprintf(`SELECT %s FROM deliveries d WHERE %s ORDER BY d.id DESC LIMIT %d`, cols, w, fetch), a)
		if err != nil {
			return nil, 0, err
		}
		keep := make([]bool, len(recs))
		for i := range keep {
			keep[i] = true
		}
		if q.Check != nil && len(recs) > 0 {
			files := make([]DeadLetterFile, len(recs))
			for i, r := range recs {
				files[i] = DeadLetterFile{ID: r.ID, File: r.File, Ino: r.Ino, At: r.At}
			}
			if keep, err = q.Check(ctx, files); err != nil {
				return nil, 0, fmt.Errorf("dead-letter page: %w", err)
			}
		}
		for i, r := range recs {
			if keep[i] && len(out) <= limit {
				out = append(out, r)
			}
		}
		examined += len(recs)
		switch {
		case len(out) > limit:
			return out[:limit], out[limit-1].ID, nil
		case len(recs) < fetch:
			return out, 0, nil // no record left
		case examined >= pageExamined*limit:
			return out, recs[len(recs)-1].ID, nil
		}
		before = recs[len(recs)-1].ID
	}
}

// deadLetterRecords runs query, which selects deadLetterColumns, and
// returns its rows, the query closed.
func (db *DB) deadLetterRecords(ctx context.Context, query string, args []any) ([]DeadLetterRecord, error) {
	return queryAll(ctx, db, "dead-letter page", db.dialect.Rebind(query), args, scanDeadLetter)
}

// DeadLetterGroup counts the current dead letters that share a reason and
// an error signature.
type DeadLetterGroup struct {
	Reason string
	// Signature is the field and detail with what varies from one message
	// to the next (numbers, quoted values, hex identifiers) replaced by a
	// placeholder: see Signature.
	Signature string
	// Example is one detail of the group, as recorded.
	Example string
	Count   int64
	// First and Last are the earliest and latest times of dead-lettering.
	First, Last time.Time
}

// Groups returns the current dead letters grouped by reason and
// error signature, the largest groups first (then by reason and
// signature). It reads each current dead letter's reason, field, detail
// and time once, in one indexed scan, and groups them here: an SQL GROUP
// BY on the detail text sorts it, which costs more than the scan. With
// check, only the dead letters whose file it finds in error/ are counted;
// the scan is then read in chunks, each closed before check is called.
// It only reads.
func (dls DeadLetters) Groups(ctx context.Context, check FileCheck) ([]DeadLetterGroup, error) {
	if err := dls.db.open(); err != nil {
		return nil, err
	}
	g := newGrouper()
	var err error
	if check == nil {
		err = dls.db.groupAll(ctx, g)
	} else {
		err = dls.Current(ctx, func(files []DeadLetterFile) error {
			keep, err := check(ctx, files)
			if err != nil {
				return err
			}
			for i, f := range files {
				if keep[i] {
					g.add(f.Reason, f.Field, f.Detail, formatTime(f.At))
				}
			}
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("dead-letter groups: %w", err)
	}
	return g.groups()
}

// groupAll adds every current dead letter to g, in one streamed scan.
func (db *DB) groupAll(ctx context.Context, g *grouper) error {
	where, args := deadLetterFilter(DeadLetterQuery{})
	rows, err := db.sql.QueryContext(ctx, db.dialect.Rebind(`SELECT d.reason, d.field, d.detail, d.at
FROM deliveries d WHERE `+where), args...)
	if err != nil {
		return db.fail("read dead letters", err)
	}
	defer rows.Close()
	var (
		reason, at            string
		fieldNull, detailNull sql.NullString
	)
	for rows.Next() {
		if err := rows.Scan(&reason, &fieldNull, &detailNull, &at); err != nil {
			return db.fail("read dead letters", err)
		}
		g.add(reason, fieldNull.String, detailNull.String, at)
	}
	if err := rows.Err(); err != nil {
		return db.fail("read dead letters", err)
	}
	return nil
}

// grouper counts dead letters by reason and signature.
type grouper struct {
	idx  map[groupKey]int
	sigs map[groupText]string // the signature of each distinct detail, computed once
	out  []DeadLetterGroup
	// first and last per group, in the ledger's text layout
	first, last []string
}

type groupKey struct{ reason, sig string }
type groupText struct{ reason, field, detail string }

func newGrouper() *grouper {
	return &grouper{idx: map[groupKey]int{}, sigs: map[groupText]string{}}
}

// add counts one dead letter, at in the ledger's text layout.
func (g *grouper) add(reason, field, detail, at string) {
	tx := groupText{reason, field, detail}
	sig, ok := g.sigs[tx]
	if !ok {
		sig = Signature(tx.field, tx.detail)
		g.sigs[tx] = sig
	}
	k := groupKey{reason, sig}
	i, ok := g.idx[k]
	if !ok {
		i = len(g.out)
		g.idx[k] = i
		g.out = append(g.out, DeadLetterGroup{Reason: reason, Signature: sig, Example: tx.detail})
		g.first, g.last = append(g.first, at), append(g.last, at)
	}
	g.out[i].Count++
	// The layout sorts as text (TimeLayout): no parse per row.
	if at < g.first[i] {
		g.first[i] = at
	}
	if at > g.last[i] {
		g.last[i] = at
	}
}

// groups returns the groups, the largest first.
func (g *grouper) groups() ([]DeadLetterGroup, error) {
	var err error
	for i := range g.out {
		if g.out[i].First, err = parseTime("deliveries.at", g.first[i]); err != nil {
			return nil, fmt.Errorf("dead-letter groups: %w", err)
		}
		if g.out[i].Last, err = parseTime("deliveries.at", g.last[i]); err != nil {
			return nil, fmt.Errorf("dead-letter groups: %w", err)
		}
	}
	slices.SortFunc(g.out, func(a, b DeadLetterGroup) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Signature, b.Signature))
	})
	return g.out, nil
}

// Signature is the error signature of a dead letter's field and detail:
// "field: detail" with each run of digits replaced by #, each quoted
// value ("...", '...', `...`) by "…", and each hexadecimal word of 8 or
// more characters by #, so that the same failure of different messages
// shares one signature. It is at most 200 bytes.
func Signature(field, detail string) string {
	s := detail
	if field != "" {
		s = field + ": " + detail
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			if j := strings.IndexByte(s[i+1:], c); j >= 0 {
				b.WriteByte(c)
				b.WriteString("…")
				b.WriteByte(c)
				i += j + 2
				continue
			}
		case isHexWord(s, i):
			j := i
			for j < len(s) && isAlnum(s[j]) {
				j++
			}
			b.WriteByte('#')
			i = j
			continue
		case c >= '0' && c <= '9':
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				i++
			}
			b.WriteByte('#')
			continue
		}
		b.WriteByte(c)
		i++
	}
	out := strings.Join(strings.Fields(b.String()), " ")
	if len(out) > 200 {
		n := 200
		for n > 0 && out[n]&0xC0 == 0x80 {
			n--
		}
		out = out[:n]
	}
	return out
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-'
}

// isHexWord reports whether a word of 8 or more hexadecimal digits (and
// dashes, as in a UUID) with at least one digit starts at s[i].
func isHexWord(s string, i int) bool {
	if i > 0 && isAlnum(s[i-1]) {
		return false
	}
	j, digit := i, false
	for j < len(s) && isAlnum(s[j]) {
		c := s[j] | 0x20
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || s[j] == '-') {
			return false
		}
		digit = digit || s[j] >= '0' && s[j] <= '9'
		j++
	}
	return digit && j-i >= 8
}

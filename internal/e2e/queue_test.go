//go:build linux

package e2e

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	_ "modernc.org/sqlite"
)

// The stages of a queue directory (docs/DESIGN.md, "The queue directory").
const (
	inbox      = "inbox"
	processing = "processing"
	done       = "done"
	errorStage = "error"
)

// isMessageName is the definition of a message name (docs/DESIGN.md, "What
// counts as a message").
func isMessageName(name string) bool {
	return strings.HasSuffix(name, ".json") && !strings.HasPrefix(name, ".")
}

var collisionSuffix = regexp.MustCompile(`(?s)^(.*?)(?:~[0-9]+)+\.json$`)

// originalName strips the "~N" collision suffixes that spool adds before
// ".json" when a name is taken ("a~2.json" -> "a.json"); a suffixed name
// that collides again may get a second one ("a~2~2.json").
func originalName(name string) string {
	if m := collisionSuffix.FindStringSubmatch(name); m != nil {
		return m[1] + ".json"
	}
	return name
}

// file is one entry of a stage as lstat sees it, never followed.
type file struct {
	Stage string
	Name  string // the entry's name in its stage (for processing/: the path below it)
	Ino   uint64
	Mode  fs.FileMode
	Size  int64
	MTime int64 // Unix nanoseconds
	Hash  string
	// Content identifies what the entry holds, whatever its name: the
	// SHA-256 of a regular file, the target of a symlink, the listing of a
	// directory.
	Content string
}

// statFile describes one entry without following it or opening anything
// but a regular file or a directory.
func statFile(t testing.TB, path string) file {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("lstat: %v", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	f := file{Name: filepath.Base(path), Ino: st.Ino, Mode: fi.Mode(), Size: fi.Size(), MTime: fi.ModTime().UnixNano()}
	switch {
	case fi.Mode().IsRegular():
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		f.Hash = sha256hex(data)
		f.Content = "file:" + f.Hash
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(path)
		if err != nil {
			t.Fatalf("readlink: %v", err)
		}
		f.Content = "symlink:" + target
	case fi.IsDir():
		names, err := os.ReadDir(path)
		if err != nil {
			t.Fatalf("readdir: %v", err)
		}
		var l []string
		for _, e := range names {
			l = append(l, e.Name())
		}
		f.Content = "dir:" + strings.Join(l, "/")
	default:
		f.Content = "special:" + fi.Mode().Type().String()
	}
	return f
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// entries lists every entry directly inside a stage, messages or not.
func entries(t testing.TB, q, stage string) []file {
	t.Helper()
	dir := filepath.Join(q, stage)
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("list %s: %v", stage, err)
	}
	var fs []file
	for _, de := range des {
		f := statFile(t, filepath.Join(dir, de.Name()))
		f.Stage = stage
		fs = append(fs, f)
	}
	return fs
}

// messages lists the message entries of a stage.
func messages(t testing.TB, q, stage string) []file {
	t.Helper()
	var ms []file
	for _, f := range entries(t, q, stage) {
		if isMessageName(f.Name) {
			ms = append(ms, f)
		}
	}
	return ms
}

// countNames counts the message names of a stage without statting them.
func countNames(t testing.TB, q, stage string) int {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(q, stage))
	if err != nil {
		t.Fatalf("list %s: %v", stage, err)
	}
	n := 0
	for _, de := range des {
		if isMessageName(de.Name()) {
			n++
		}
	}
	return n
}

// countClaims counts what sits in processing/: every entry inside the
// per-consumer session directories, plus anything else lying there.
func countClaims(t testing.TB, q string) int {
	t.Helper()
	dir := filepath.Join(q, processing)
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("list processing: %v", err)
	}
	n := 0
	for _, de := range des {
		if !de.IsDir() || isMessageName(de.Name()) {
			n++
			continue
		}
		in, err := os.ReadDir(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatalf("list processing/%s: %v", de.Name(), err)
		}
		n += countSessionClaims(in)
	}
	return n
}

// walk calls fn for every entry below root (not root itself), with its path
// relative to root, without following symlinks. It does not descend into
// directories named like messages below the first level: a dead-lettered
// directory's inside is its content, not a separate entry.
func walk(t testing.TB, root string, fn func(rel string, d fs.DirEntry)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == root {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		fn(rel, d)
		if d.IsDir() && isMessageName(d.Name()) {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
}

// requireEmpty fails the test unless a stage has no entries at all (I5:
// not even an empty session directory of a finished or dead consumer).
func requireEmpty(t testing.TB, q, stage string) {
	t.Helper()
	var left []string
	walk(t, filepath.Join(q, stage), func(rel string, d fs.DirEntry) {
		left = append(left, fmt.Sprintf("%q (%s)", rel, d.Type()))
	})
	if len(left) > 0 {
		t.Errorf("%s/ must be empty, holds %d entries: %s", stage, len(left), strings.Join(head(left, 20), ", "))
	}
}

func head(s []string, n int) []string {
	if len(s) > n {
		return append(slices.Clip(s[:n]), fmt.Sprintf("... %d more", len(s)-n))
	}
	return s
}

// snapshot describes every entry below the stages of a queue (recursively,
// links not followed), keyed by path, for a before/after comparison. The
// ledger files are left out: they are compared through their tables.
func snapshot(t testing.TB, q string) map[string]file {
	t.Helper()
	snap := map[string]file{}
	for _, stage := range []string{inbox, processing, done, errorStage} {
		root := filepath.Join(q, stage)
		if err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(q, path)
			snap[rel] = statFile(t, path)
			return nil
		}); err != nil {
			t.Fatalf("snapshot %s: %v", root, err)
		}
	}
	return snap
}

// diffSnapshots lists what changed between two snapshots. Directory mtimes
// are not compared: they are the stage directories, which an aborted
// command may legitimately touch without moving anything.
func diffSnapshots(before, after map[string]file) []string {
	var diffs []string
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			diffs = append(diffs, "removed "+p)
		case a.Content != b.Content || a.Ino != b.Ino || a.Mode != b.Mode || a.Size != b.Size ||
			(!b.Mode.IsDir() && a.MTime != b.MTime):
			diffs = append(diffs, fmt.Sprintf("changed %s: %+v -> %+v", p, b, a))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			diffs = append(diffs, "added "+p)
		}
	}
	sort.Strings(diffs)
	return diffs
}

// openLedger opens a queue's SQLite ledger read-only.
func openLedger(t testing.TB, q string) *sql.DB {
	t.Helper()
	path := filepath.Join(q, "ledger.db")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("ledger: %v", err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatalf("open ledger: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Ping(); err != nil {
		t.Fatalf("open ledger: %v", err)
	}
	return db
}

// processedRow is one row of the processed table.
type processedRow struct {
	MsgID, OrderNo string
	Seq            int64
	Amount         string
	File, Hash     string
	Claim          string
}

func processedRows(t testing.TB, db *sql.DB) map[string]processedRow {
	t.Helper()
	rows, err := db.Query(`SELECT msg_id, COALESCE(order_no, ''), COALESCE(seq, 0), COALESCE(amount, ''),
		file, content_hash, claim FROM processed`)
	if err != nil {
		t.Fatalf("query processed: %v", err)
	}
	defer rows.Close()
	m := map[string]processedRow{}
	for rows.Next() {
		var r processedRow
		if err := rows.Scan(&r.MsgID, &r.OrderNo, &r.Seq, &r.Amount, &r.File, &r.Hash, &r.Claim); err != nil {
			t.Fatalf("scan processed: %v", err)
		}
		if _, dup := m[r.MsgID]; dup {
			t.Errorf("I2: processed holds msg_id %q twice", r.MsgID)
		}
		m[r.MsgID] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("query processed: %v", err)
	}
	return m
}

// delivery is one recorded claim: a row of the claims view (migration 003),
// which holds the processed rows and the other deliveries alike.
type delivery struct {
	Claim   string
	File    string
	Ino     uint64
	MsgID   string
	Outcome string
	Reason  string
	Field   string
	Detail  string
	Hash    string
}

func deliveries(t testing.TB, db *sql.DB) []delivery {
	t.Helper()
	rows, err := db.Query(`SELECT claim, file, COALESCE(ino, 0), COALESCE(msg_id, ''), outcome,
		COALESCE(reason, ''), COALESCE(field, ''), COALESCE(detail, ''), COALESCE(content_hash, '')
		FROM claims ORDER BY at, claim`)
	if err != nil {
		t.Fatalf("query deliveries: %v", err)
	}
	defer rows.Close()
	var ds []delivery
	for rows.Next() {
		var d delivery
		var ino int64
		if err := rows.Scan(&d.Claim, &d.File, &ino, &d.MsgID, &d.Outcome,
			&d.Reason, &d.Field, &d.Detail, &d.Hash); err != nil {
			t.Fatalf("scan deliveries: %v", err)
		}
		d.Ino = uint64(ino)
		ds = append(ds, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("query deliveries: %v", err)
	}
	return ds
}

// count runs a COUNT(*) query.
func count(t testing.TB, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// lines splits command output into lines, without the final newline.
// notLogged is lines(s) without consume's log records (text format, which
// begin "time="): what is left are the command's own lines, such as its
// one error line.
func notLogged(s string) []string {
	var out []string
	for _, l := range lines(s) {
		if !strings.HasPrefix(l, "time=") {
			out = append(out, l)
		}
	}
	return out
}

func lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// countSessionClaims counts the claims among the entries of a session directory:
// not the session's own marks (a name starting with ".": its boot, the
// calls it started).
func countSessionClaims(des []os.DirEntry) int {
	n := 0
	for _, de := range des {
		if !strings.HasPrefix(de.Name(), ".") {
			n++
		}
	}
	return n
}

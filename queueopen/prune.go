package queueopen

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/fsck"
	"github.com/spoolq/spool/ledger"
)

// PruneOptions are one prune of a queue's ledger (Prune).
type PruneOptions struct {
	// OlderThan is the window as the operator wrote it (ParseWindow),
	// recorded in the audit; Window is its value.
	OlderThan string
	Window    time.Duration
	// Files: also remove the files of done/ that the pruned rows record
	// (fsck.Prune).
	Files bool
	// DryRun counts what would go and changes nothing (no audit row).
	DryRun bool
	// Audited is who prunes, for the audit row.
	Audited
	// OnPruned, if set, is told what was (or would be) pruned and the
	// horizon once the prune succeeded, before its audit row ends (whose
	// failure Prune then returns).
	OnPruned func(n fsck.Pruned, before time.Time)
}

// AuditPrune is the audit action of a prune.
const AuditPrune = "prune"

// Prune removes the rows of the ledger of the queue at dir (opened as o
// says, for reading: a prune binds nothing) older than p.Window, and
// with p.Files their files of done/, keeping everything of the claims in
// processing/ now (fsck.Prune, ledger.Prune.KeepClaims). Unless DryRun
// it is an audited action (task.BeginAction): its row, with the window,
// the horizon and Files, is written before anything is removed, and ends
// with the counts (kept: the files left without rows, when not Files).
// It returns what was (or would be) pruned and the horizon, rows
// older than which went (OnPruned hears them first).
func Prune(ctx context.Context, dir string, o Options, p PruneOptions) (n fsck.Pruned, before time.Time, err error) {
	d, err := OpenDir(dir)
	if err != nil {
		return n, before, err
	}
	defer CloseDir(d, &err)
	inFlight, err := d.Claims()
	if err != nil {
		return n, before, err
	}
	o.Use = Read
	l, err := Attach(ctx, d, o)
	if err != nil {
		return n, before, err
	}
	defer func() {
		if cerr := l.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close ledger: %w", cerr)
		}
	}()
	before = time.Now().Add(-p.Window)
	if p.DryRun {
		n, err = fsck.Prune(ctx, d, l, ledger.Prune{Before: before, KeepClaims: inFlight, DryRun: true}, p.Files)
		if err == nil && p.OnPruned != nil {
			p.OnPruned(n, before)
		}
		return n, before, err
	}
	run, err := p.begin(ctx, l, AuditPrune, map[string]any{"older_than": p.OlderThan, "before": before.UTC().Format(time.RFC3339), "files": p.Files})
	if err != nil {
		return n, before, err
	}
	n, err = fsck.Prune(ctx, d, l, ledger.Prune{Before: before, KeepClaims: inFlight}, p.Files)
	run.Counts["processed"], run.Counts["deliveries"] = n.Rows.Processed, n.Rows.Deliveries
	if n.Rows.BatchFiles > 0 { // a queue of batch files
		run.Counts["batch_files"] = n.Rows.BatchFiles
	}
	run.Counts["files"], run.Counts["bytes"] = n.Files, n.Bytes
	if !p.Files {
		run.Counts["kept"] = n.Kept
	}
	if err == nil && p.OnPruned != nil {
		p.OnPruned(n, before)
	}
	return n, before, p.end(ctx, run, err)
}

// ParseWindow parses a window of time (prune's --older-than, a --since
// ago): a positive Go duration, also accepting a leading number of days:
// "30d", "1d12h", "36h". Zero, negative and overflowing windows are
// refused.
func ParseWindow(s string) (time.Duration, error) {
	const day = 24 * time.Hour
	var days int64
	rest := s
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || s[:i] == "" || s[0] == '+' || s[0] == '-' {
			return 0, fmt.Errorf("%q: want a duration such as 30d, 36h or 1d12h", s)
		}
		if n > int64(1<<63-1)/int64(day) {
			return 0, fmt.Errorf("%q is too long", s)
		}
		days, rest = n, s[i+1:]
	}
	var extra time.Duration
	if rest != "" {
		var err error
		if extra, err = time.ParseDuration(rest); err != nil {
			return 0, fmt.Errorf("%q: want a duration such as 30d, 36h or 1d12h", s)
		}
		if days > 0 && extra < 0 {
			return 0, fmt.Errorf("%q: want a duration such as 30d, 36h or 1d12h", s)
		}
	}
	total := time.Duration(days) * day
	if extra > 0 && total > time.Duration(1<<63-1)-extra {
		return 0, fmt.Errorf("%q is too long", s)
	}
	total += extra
	if total <= 0 {
		return 0, fmt.Errorf("%q: the window must be longer than zero", s)
	}
	return total, nil
}

// ParseSince parses a point in time as the filters take it (--since,
// --until): an RFC 3339 time, or a window ago from now (ParseWindow: 90m,
// 36h, 7d, 1d12h).
func ParseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := ParseWindow(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: want an RFC 3339 time (2026-03-01T10:00:00Z) or a duration ago (24h, 7d)", s)
	}
	return now.Add(-d), nil
}

package queueopen

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spoolq/spool/metrics"
)

// Finding is one line of a queue's check (CheckQueue): what was checked
// (queue, ledger, stages, inotify) and what was found.
type Finding struct {
	Name, Text string
}

// CheckQueue checks, changing nothing, the queue at dir as a consumer
// of it with the ledger db would need it, as spool check does: its
// identity; its ledger (opened read-only: it answers, has this spool's
// schema and is this queue's or bound to none yet; none yet is no
// problem for a queue without history, which the first consume gives
// one); its stages (one filesystem, each takes a new file, enough space
// and inodes free: metrics.Ready, metrics.FreeSpace); and inotify's
// limits for this user (metrics.InotifyUsage), a problem only when
// watch (a consumer that would wait for notifications). It returns a
// Finding for each that could be checked, and passes each problem to
// problem.
func CheckQueue(ctx context.Context, dir, db string, watch bool, problem func(error)) []Finding {
	var out []Finding
	found := func(name, format string, args ...any) {
		out = append(out, Finding{Name: name, Text: fmt.Sprintf(format, args...)})
	}
	d, err := OpenDir(dir)
	if err != nil {
		problem(err)
		return out
	}
	defer d.Close() // opened read-only for the checks
	id, err := d.ID()
	switch {
	case err != nil:
		problem(err)
	case id == "":
		found("queue", "%s, no identity yet (the first consume gives it one)", dir)
	default:
		found("queue", "%s, identity %s", dir, id)
	}

	name := Redact(LedgerName(dir, db))
	l, err := Attach(ctx, d, Options{DB: db, Use: Read, ReadOnly: true})
	var le *LedgerError
	history, _ := d.HasHistory()
	switch {
	case errors.As(err, &le) && le.Found == NoFile && !history:
		found("ledger", "%s: none yet (the first consume creates it)", name)
	case err != nil:
		problem(err)
	default:
		owner, qerr := l.QueueID(ctx)
		switch {
		case qerr != nil:
			problem(qerr)
		case owner == "":
			found("ledger", "%s: answers, schema current, bound to no queue yet (the first consume binds it)", name)
		default:
			found("ledger", "%s: answers, schema current, this queue's", name)
		}
		if cerr := l.Close(); cerr != nil {
			problem(fmt.Errorf("close ledger: %w", cerr))
		}
	}

	// OpenDir refused stages on two filesystems already.
	if err := (metrics.Ready{Dir: d}).Check(ctx); err != nil {
		problem(err)
	} else if space, err := metrics.FreeSpace(dir); err != nil {
		problem(err)
	} else {
		found("stages", "one filesystem, each takes a new file; %s", space)
		if p := space.Problem(dir); p != "" {
			problem(errors.New(p))
		}
	}

	if u, err := metrics.InotifyUsage(os.Getuid()); err != nil {
		found("inotify", "unknown: %v", err)
	} else {
		found("inotify", "%s", u)
		if p := u.Problem(); watch && p != "" {
			problem(errors.New(p))
		}
	}
	return out
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/report"
)

var lagCommand = &command{
	name:    "lag",
	args:    "DIR THRESHOLD [--max-age DURATION] [--json] [--db PATH]",
	summary: "print inbox=N processing=N error=N; exit 1 when inbox > THRESHOLD",
	help: `
Prints exactly one line, inbox=N processing=N error=N, counting messages
(NAME.json, or the files the include patterns of a queue of batch files
match; not starting with '.'), and exits 1 when inbox holds more than
THRESHOLD, a non-negative integer. It reads directory names only, never file
contents or the ledger, so it stays cheap on a million waiting files.

--max-age DURATION (30s, 15m, 2h) also exits 1 when the oldest message in
inbox/ is older than DURATION. A message's age is now minus its modification
time (lstat, links not followed), the oldest being the one with the earliest
modification time whatever its name, as spool status reports it: the time
the producer wrote the file (a copy preserving times, cp -p or rsync -t,
carries the source's). An empty inbox is never too old. --max-age and --json
cost one lstat per waiting message; the line stays exactly the same.

--json prints one object instead of the line, with stable field names
(fields may be added, none renamed or removed), and the same exit status:
  inbox, processing, error   the counts of the line
  oldest_age_seconds         the oldest inbox message's age in seconds
                             (milliseconds as a fraction), null when inbox/
                             holds none
  threshold                  THRESHOLD
  max_age_seconds            --max-age in seconds, null without it
  over                       true when the exit status is 1: inbox over
                             THRESHOLD, or the oldest message over --max-age
  held                       the messages held aside in held/ (spool hold),
                             never counted in inbox
  paused                     true while the queue is paused (spool pause):
                             its consumers claim nothing, so inbox grows;
                             null when the ledger could not be read (said
                             on stderr; the exit status is the same)

--json reads the ledger for paused alone (one row; --db names it as for
the other commands); the line never reads it.`,
	opts: newOpts[lagOpts],
}

// lagOpts are spool lag's.
type lagOpts struct {
	dir       string
	threshold uint64
	maxAge    *time.Duration
	asJSON    *bool
	db        *string
}

func (o *lagOpts) flags(fs *flag.FlagSet) {
	o.maxAge = fs.Duration("max-age", 0, "also exit 1 when the oldest message in inbox/ is older than `DURATION` (by modification time)")
	o.asJSON = fs.Bool("json", false, "print one JSON object instead of the line (see above)")
	o.db = addDBFlag(fs)
}

func (o *lagOpts) validate(e *env, pos []string) (err error) {
	if err := e.positionals(pos, 2, 2, "DIR", "THRESHOLD"); err != nil {
		return err
	}
	o.dir = pos[0]
	if o.threshold, err = strconv.ParseUint(pos[1], 10, 64); err != nil {
		return e.usage("THRESHOLD %q: want a non-negative integer", pos[1])
	}
	if *o.maxAge < 0 {
		return e.usage("--max-age %v: want a duration of 0 or more", *o.maxAge)
	}
	if !e.given("max-age") {
		*o.maxAge = -1 // no bound
	}
	return nil
}

func (o *lagOpts) run(ctx context.Context, e *env) (err error) {
	d, err := openQueue(o.dir)
	if err != nil {
		return err
	}
	defer queueopen.CloseDir(d, &err)
	lag, err := report.MeasureLag(ctx, d, o.threshold, *o.maxAge, *o.asJSON)
	if err != nil {
		return err
	}
	if *o.asJSON {
		lag.Paused = lagPaused(ctx, e, d, *o.db)
		if err := e.output("", func(w io.Writer) error { return report.WriteJSON(w, lag) }); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "inbox=%d processing=%d error=%d\n", lag.Inbox, lag.Processing, lag.Error)
	}
	if lag.Over {
		return errCheckFailed
	}
	return nil
}

// lagPaused reads whether the queue is paused, for lag --json: nil, said
// on stderr, when the ledger cannot be read, for lag's exit status is the
// inbox's alone.
func lagPaused(ctx context.Context, e *env, d *queue.Dir, db string) *bool {
	l, err := openLedgerFor(ctx, d, db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		e.warn("paused: null: %v", err)
		return nil
	}
	p, err := l.Holding().PauseState(ctx)
	if cerr := l.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close ledger: %w", cerr)
	}
	if err != nil {
		e.warn("paused: null: %v", err)
		return nil
	}
	return &p.Paused
}

package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/report"
)

var lagCommand = &command{
	name:    "lag",
	args:    "DIR THRESHOLD [--max-age DURATION] [--json] [--db PATH]",
	summary: "print inbox=N processing=N error=N; exit 1 when inbox > THRESHOLD",
	help: `
Prints exactly one line, inbox=N processing=N error=N, counting messages
(NAME.json, not starting with '.'), and exits 1 when inbox holds more than
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
}

func init() { lagCommand.run = runLag }

// lagJSON is the object of spool lag --json; its field names are stable.
type lagJSON struct {
	Inbox            int      `json:"inbox"`
	Processing       int      `json:"processing"`
	Error            int      `json:"error"`
	OldestAgeSeconds *float64 `json:"oldest_age_seconds"`
	Threshold        uint64   `json:"threshold"`
	MaxAgeSeconds    *float64 `json:"max_age_seconds"`
	Over             bool     `json:"over"`
	Held             int      `json:"held"`
	Paused           *bool    `json:"paused"`
}

func runLag(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	maxAge := flags.Duration("max-age", 0, "also exit 1 when the oldest message in inbox/ is older than `DURATION` (by modification time)")
	asJSON := flags.Bool("json", false, "print one JSON object instead of the line (see above)")
	db := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := e.positionals(pos, 2, 2, "DIR", "THRESHOLD"); err != nil {
		return err
	}
	threshold, perr := strconv.ParseUint(pos[1], 10, 64)
	if perr != nil {
		return e.usage("THRESHOLD %q: want a non-negative integer", pos[1])
	}
	ageSet := given(flags, "max-age")
	if *maxAge < 0 {
		return e.usage("--max-age %v: want a duration of 0 or more", *maxAge)
	}
	d, err := openQueue(pos[0])
	if err != nil {
		return err
	}
	defer closeQueue(d, &err)
	var n [3]int
	for i, s := range []queue.Stage{queue.Inbox, queue.Processing, queue.Error} {
		if n[i], err = d.Count(s); err != nil {
			return err
		}
	}
	over := uint64(n[0]) > threshold
	out := lagJSON{Inbox: n[0], Processing: n[1], Error: n[2], Threshold: threshold}
	if ageSet || *asJSON {
		// Only now is a file stat'ed: the plain line reads names alone.
		oldest, err := report.OldestInbox(ctx, d)
		if err != nil {
			return err
		}
		if !oldest.IsZero() {
			age := max(time.Since(oldest), 0)
			secs := report.Seconds(age)
			out.OldestAgeSeconds = &secs
			over = over || ageSet && age > *maxAge
		}
		if ageSet {
			secs := report.Seconds(*maxAge)
			out.MaxAgeSeconds = &secs
		}
	}
	out.Over = over
	if *asJSON {
		if out.Held, err = d.Count(queue.Held); err != nil {
			return err
		}
		out.Paused = lagPaused(ctx, e, d, *db)
		if err := e.output("", func(w io.Writer) error { return report.WriteJSON(w, out) }); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "inbox=%d processing=%d error=%d\n", n[0], n[1], n[2])
	}
	if over {
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

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/report"
)

var lagCommand = &cmdline.Command{
	Name:    "lag",
	Args:    "DIR THRESHOLD [--max-age DURATION] [--json] [--db PATH]",
	Summary: "print inbox=N processing=N error=N; exit 1 when inbox > THRESHOLD",
	Options: cmdline.New[lagOpts],
}

// lagOpts are spool lag's.
type lagOpts struct {
	dir       string
	threshold uint64
	maxAge    *time.Duration
	asJSON    *bool
	db        *string
}

func (o *lagOpts) Flags(fs *flag.FlagSet) {
	o.maxAge = fs.Duration("max-age", 0, "also exit 1 when the oldest message in inbox/ is older than `DURATION` (by modification time)")
	o.asJSON = fs.Bool("json", false, "print one JSON object instead of the line (see above)")
	o.db = addDBFlag(fs)
}

func (o *lagOpts) Validate(e *env, pos []string) (err error) {
	if err := e.Positionals(pos, 2, 2, "DIR", "THRESHOLD"); err != nil {
		return err
	}
	o.dir = pos[0]
	if o.threshold, err = strconv.ParseUint(pos[1], 10, 64); err != nil {
		return e.Usage("THRESHOLD %q: want a non-negative integer", pos[1])
	}
	if *o.maxAge < 0 {
		return e.Usage("--max-age %v: want a duration of 0 or more", *o.maxAge)
	}
	if !e.Given("max-age") {
		*o.maxAge = -1 // no bound
	}
	return nil
}

func (o *lagOpts) Run(ctx context.Context, e *env) (err error) {
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
		if err := output(e, "", func(w io.Writer) error { return report.WriteJSON(w, lag) }); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.Stdout, "inbox=%d processing=%d error=%d\n", lag.Inbox, lag.Processing, lag.Error)
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
		e.Warn("paused: null: %v", err)
		return nil
	}
	p, err := l.Holding().PauseState(ctx)
	if cerr := l.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close ledger: %w", cerr)
	}
	if err != nil {
		e.Warn("paused: null: %v", err)
		return nil
	}
	return &p.Paused
}

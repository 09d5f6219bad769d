package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/report"
)

var flushCommand = &cmdline.Command{
	Name:    "flush",
	Args:    "DIR [MSG_ID...] [--db PATH]",
	Summary: "make the retries waiting for their time due now (postqueue -f)",
	Options: cmdline.New[flushOpts],
}

// flushOpts are spool flush's: the queue and the msg_ids (none: all).
type flushOpts struct {
	dirOpts
	ids []string
}

func (o *flushOpts) Validate(e *env, pos []string) error {
	if err := e.Positionals(pos, 1, -1, "DIR"); err != nil {
		return err
	}
	o.dir, o.ids = pos[0], pos[1:]
	return nil
}

func (o *flushOpts) Run(ctx context.Context, e *env) error {
	var missing []string
	err := queueopen.Flush(ctx, o.dir, ledgerOpts{use: writeLedger}.options(*o.db), cliAudited(e), o.ids, func(flushed, m []string) {
		fmt.Fprintf(e.Stdout, "flushed %d retries\n", len(flushed))
		for _, id := range flushed {
			fmt.Fprintf(e.Stdout, "  %s\n", report.Shown(id))
		}
		for _, id := range m {
			missing = append(missing, report.Shown(id))
		}
	})
	if len(missing) > 0 {
		e.Warn("no retry waiting for %s", strings.Join(missing, ", "))
		if err != nil { // the audit row's end alone: the flush was done
			e.Warn("%v", err)
		}
		return errCheckFailed
	}
	if err != nil {
		return ledgerFailure(err, o.dir, *o.db)
	}
	return nil
}

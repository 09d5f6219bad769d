package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spoolq/spool/report"
)

var flushCommand = &command{
	name:    "flush",
	args:    "DIR [MSG_ID...] [--db PATH]",
	summary: "make the retries waiting for their time due now (postqueue -f)",
	help: `
Makes the retries that wait for their time due now: those of the msg_ids
named, or every one when none is named. Their attempt counts are kept, so a
message that fails again is still dead-lettered after --retry-max attempts
in all. The next consume takes them (a drain leaves a retry that is not due
in inbox/ and holds it until its time: after a flush it takes it). A
consume --watch that already holds a retry in processing/ keeps it until
the time it had; restart it, or flush before it claims.

Prints: flushed N retries, then each msg_id. A msg_id named that waits for
no retry (unknown, processed, dead-lettered or already due) is reported on
stderr, and the exit status is then 1; the others are flushed all the same.`,
	opts: newOpts[flushOpts],
}

// flushOpts are spool flush's: the queue and the msg_ids (none: all).
type flushOpts struct {
	dirOpts
	ids []string
}

func (o *flushOpts) validate(e *env, pos []string) error {
	if err := e.positionals(pos, 1, -1, "DIR"); err != nil {
		return err
	}
	o.dir, o.ids = pos[0], pos[1:]
	return nil
}

func (o *flushOpts) run(ctx context.Context, e *env) (err error) {
	_, l, done, err := openBound(ctx, o.dir, *o.db, ledgerOpts{use: writeLedger})
	if err != nil {
		return err
	}
	defer done(&err)
	ids := o.ids
	sel := map[string]any{"all": true}
	if len(ids) > 0 {
		sel = map[string]any{"msg_ids": ids}
	}
	run, err := beginAudit(ctx, e, l, "", auditFlush, sel)
	if err != nil {
		return err
	}
	defer endAudit(ctx, e, run, &err)
	flushed, err := l.Messages().FlushRetries(ctx, ids, time.Now())
	if err != nil {
		return err
	}
	run.Counts["done"] = int64(len(flushed))
	if len(ids) > 0 {
		run.Counts["selected"] = int64(len(ids))
		run.Counts["missing"] = int64(len(ids) - len(flushed))
	}
	fmt.Fprintf(e.stdout, "flushed %d retries\n", len(flushed))
	got := map[string]bool{}
	for _, id := range flushed {
		got[id] = true
		fmt.Fprintf(e.stdout, "  %s\n", report.Shown(id))
	}
	var missing []string
	for _, id := range ids {
		if !got[id] {
			missing = append(missing, report.Shown(id))
		}
	}
	if len(missing) > 0 {
		e.warn("no retry waiting for %s", strings.Join(missing, ", "))
		return errCheckFailed
	}
	return nil
}

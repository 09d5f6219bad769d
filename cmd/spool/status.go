package main

import (
	"context"
	"flag"
	"io"

	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/report"
)

var statusCommand = &command{
	name:    "status",
	args:    "DIR [--json] [--db PATH]",
	summary: "human summary: messages per stage, oldest waiting, ledger counts, dead letters by reason",
	help: `
Prints, for people, whether the queue is paused (by whom, since when, why),
the messages in each stage (held/ too, when it holds any, with the msg_ids
held), how long the oldest message has waited in inbox/, and what the ledger holds: processed rows, duplicate
deliveries and dead letters by reason; and, once it has rows, the outbox:
pending rows, the oldest one's age, the parked rows with their reasons. The human layout may change; scripts
should use --json, or lag, dups, errors and order-check.

The age of the oldest waiting message is now minus the earliest modification
time (lstat, links not followed) among the messages in inbox/, whatever
their names: the time the producer wrote the file, which a copy preserving
times (cp -p, rsync -t) sets to the source's. It costs one lstat per
waiting message.

--json prints one object with stable field names (fields may be added,
none renamed or removed):
  queue                  the queue directory
  now                    when the report was taken (RFC 3339, UTC)
  stages                 {"inbox": N, "processing": N, "done": N, "error": N};
                         processing counts claims in flight
  oldest_inbox_mtime     modification time of the oldest message in inbox/,
                         null when inbox/ holds none
  oldest_age_seconds     now minus oldest_inbox_mtime (milliseconds as a
                         fraction), null when inbox/ holds none
  waiting_for_done_file  data files in inbox/ waiting for their done-file
                         (done_file), not counted in stages.inbox;
                         oldest_waiting_for_done_file_mtime: the earliest
                         modification time among them, null when none waits
  done_files_without_data  done-files in inbox/ whose data file is not there
  inbox_not_taken        entries of inbox/ the queue never takes, not
                         starting with '.': not NAME.json, or not a name
                         spool.conf's include matches (orders.csv.gz where
                         only *.csv is included); inbox_not_taken_names:
                         the first 3
  ledger                 {"processed": N, "duplicates": N, "dead_letters": N,
                         "dead_letters_by_reason": {"REASON": N, ...}}
  temp_files             temp files in the queue; stale_temp_files: those
                         whose writer is gone (spool fsck --repair removes them)
  interrupted_replays    replays killed before they finished
  discarded              dead letters discarded on purpose (spool discard);
                         interrupted_discards: discards killed before they
                         finished (spool fsck --repair finishes them)
  retries_waiting        messages waiting for a retry of their business work
  next_retry_at          when the soonest of them is due, null when none waits
  next_retry_in_seconds  how far that is from now (negative once due), or null
  outbox                 {"pending": N, "oldest_pending_created_at": TIME,
                         "oldest_pending_age_seconds": S, "failing": N,
                         "parked": N, "published": N, "parked_rows": [{"id",
                         "aggregate", "type", "reason", "attempts",
                         "parked_at"}, ... the first 10]}: the outbox that
                         spool relay delivers; null on a ledger not yet
                         migrated to have one
  paused                 {"by", "role", "via", "note", "at"}: who paused the
                         queue (spool pause), why and since when; null
                         while it is not paused
  held                   {"files": N, "msg_ids": N}: the messages in held/
                         and the msg_ids held (spool hold; spool holds
                         lists them)
  batch_files            [{"file", "processed", "duplicates", "dead_letters",
                         "last_commit"}, ...]: the batch files whose records
                         were committed last (at most 10, the latest first)
                         and their records so far by outcome; [] when none

The text form tells the dead letters now in error/ (the error line) from
those the ledger recorded ever (the ledger line, and by reason), which
include the ones replayed or discarded since.

A DIR/spool.conf that consume would refuse (a misspelt key) is a warning
on stderr, pointing at spool check DIR; the status is still printed.`,
	opts: newOpts[statusOpts],
}

// statusOpts are spool status's.
type statusOpts struct {
	dirOpts
	asJSON *bool
}

func (o *statusOpts) flags(fs *flag.FlagSet) {
	o.asJSON = fs.Bool("json", false, "one JSON object with every field of the report (see above)")
	o.dirOpts.flags(fs)
}

func (o *statusOpts) run(ctx context.Context, e *env) (err error) {
	d, l, done, err := openBound(ctx, o.dir, *o.db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	r, err := report.Status(ctx, d, l)
	if err != nil {
		return err
	}
	// A status that looks fine over a spool.conf every consumer refuses
	// says too little.
	if _, cerr := queueopen.ReadConfig(o.dir); cerr != nil {
		e.warn("consume refuses %v. Try: spool check %s", cerr, o.dir)
	}
	if *o.asJSON {
		return e.output("", func(w io.Writer) error { return report.WriteJSON(w, r.JSON()) })
	}
	return e.output("", func(w io.Writer) error { return report.WriteStatus(w, r) })
}

package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"time"

	"github.com/spoolq/spool/report"
)

var showCommand = &command{
	name:    "show",
	args:    "DIR MSG_ID|FILE [--json] [--db PATH]",
	summary: "one message's story: where it is now, its ledger record, deliveries, retry and replays",
	help: `
Shows what the queue knows of one message, named by its msg_id or by a file
name (the name it had in inbox/, or its name in a stage): where its files
are now (found by the inodes the ledger recorded and by their names; a
claim in processing/ says whether it waits for its retry, and until when), its
processed row (when, from which file, the content's SHA-256, the version,
traceparent and tenant the contract's headers found in it), every other
delivery of it (duplicates, conflicts: another body under the same msg_id,
dead letters with reason, field, detail and attempts), the retry it waits
for (attempts failed, when it is due, the last error), its reservation for
a call (--post, --exec: by which consumer session, when, and whether that
session is gone, its call bound holding the msg_id), the replays of its
files and their discards (who, when, why, the body's SHA-256, and where
--to moved them), and what of it is held aside (spool hold: its files in
held/, the hold of its msg_id, who and why). A dead letter is found by its msg_id whatever the reason
it was refused for, as long as its msg_id was valid (a missing field,
another field invalid); one without a valid msg_id by its file name. A
batch file, named as it was in inbox/, shows what became of its records
(processed, duplicates, dead letters, as spool status counts them, for
each file of that name the ledger knows) and the names of its first 10
dead letters; a record, named by its msg_id, shows its origin in the
processed row's file (orders.csv#L17). It changes nothing.

Exit 1 when the queue knows nothing of it: no ledger record and no file of
that name in inbox/, processing/, error/ or done/.

--json prints one object: query, msg_id (null for a file without a valid
one), places [{stage, name}], processed {processed_at, file, content_hash,
claim, headers {version, trace, tenant}} or null, deliveries [{at, file, outcome, conflict, reason, field,
detail, content_hash, attempts, last_failure}], retry {attempts,
first_failure, last_failure, next_at, due_in_seconds, last_error} or null,
replays [{at, file, new_name, by, note}], and discards [{at, finished_at,
file, msg_id, reason, content_hash, size, by, note, state, outcome, to,
new_name}] (spool discard: outcome deleted, moved or missing; to and
new_name where --to put it), held [{file, origin, cause, by, via, note,
at}], msg_id_held {by, via, note, at} or null, batch_files [{file,
processed, duplicates, dead_letters, last_commit, dead_letter_files}], and
reservation {at, session, claim, call_bound_seconds,
session_in_processing} or null.`,
	opts: newOpts[showOpts],
}

// showOpts are spool show's: the queue and a message's msg_id or file.
type showOpts struct {
	dirOpts
	what   string
	asJSON *bool
}

func (o *showOpts) flags(fs *flag.FlagSet) {
	o.asJSON = fs.Bool("json", false, "one JSON object (see above)")
	o.dirOpts.flags(fs)
}

func (o *showOpts) validate(e *env, pos []string) error {
	if err := e.positionals(pos, 2, 2, "DIR", "MSG_ID or FILE"); err != nil {
		return err
	}
	o.dir, o.what = pos[0], pos[1]
	return nil
}

func (o *showOpts) run(ctx context.Context, e *env) (err error) {
	d, l, done, err := openBound(ctx, o.dir, *o.db, ledgerOpts{use: readLedger})
	if err != nil {
		return err
	}
	defer done(&err)
	m, err := report.Story(ctx, d, l, o.what)
	if err != nil {
		return err
	}
	if !m.Found() {
		return &inputError{path: report.Shown(o.what), err: errors.New("the queue knows nothing of it (no ledger record, no file of that name)")}
	}
	now := time.Now()
	if *o.asJSON {
		return e.output("", func(w io.Writer) error { return report.WriteJSON(w, m.JSON(now)) })
	}
	return e.output("", func(w io.Writer) error { return report.WriteStory(w, m, now) })
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/spoolq/spool/fsck"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/report"
)

var fsckCommand = &command{
	name:    "fsck",
	args:    "DIR [--repair] [--json] [contract flags] [--db PATH]",
	summary: "check that the ledger and the directories agree; --repair fixes what it can",
	help: `
Compares the queue's directories with its ledger and reports each kind of
disagreement with a count and examples:

  other-queue             the ledger belongs to another queue
  no-queue-id             DIR/queue.id is missing, the ledger knows its queue
  done-unrecorded         a file in done/ whose message has no processed or
                          duplicate record (rows lost: a redelivery would be
                          processed again)
  done-invalid            a file in done/ with no record that is not a valid
                          message under the contract
  error-unrecorded        a file in error/ with no dead-letter record
  dead-letter-missing     a dead-letter record whose file is gone from
                          error/, neither replayed nor discarded (removed
                          by hand)
  dead-claims             claims of dead consumers still in processing/
  temp-files              stale temp files of killed producers or consumers
  interrupted-replay      a replay killed before it finished
  rebuilding              the ledger is being rebuilt by --repair, or a
                          rebuild was killed: every command refuses it
  processed-without-file  a processed row whose file is in no stage
                          (informational: prune and operators remove files)
  kept-after-prune        a file in done/ whose row spool prune removed
                          without --files (informational: never recorded
                          again; prune --files removes it)
  dead-letter-replaced    a dead-letter record of a file edited in error/
                          and then replayed or discarded (informational)
  unbound                 a queue made before queue identities
                          (informational)
  copied                  no file has the inode the ledger recorded; they
                          were matched by name: the queue was copied or
                          restored (informational)

Exit 0 when it finds nothing but informational findings, 1 otherwise.

--repair fixes what can be fixed without guessing, one line per repair,
and then checks again: it records a processed row again from each valid
file of done/ that lost it (marked repaired_at, with the time; a duplicate
record when another file holds the msg_id), gives each unrecorded dead
letter a record with reason unknown, stops listing a dead letter whose
file is gone (its record is kept, as history), recovers dead claims,
removes stale temp files, finishes interrupted replays, binds an unbound
queue, and puts back a lost queue.id when the ledger knew every file; when
it did not, the ledger may be another queue's, and nothing at all is
repaired. It leaves
alone a ledger of another queue and invalid files in done/. Running it again finds
nothing more to do. With --repair a missing or empty ledger is created and
rebuilt from the directories; it is marked before its first row, and every
other command refuses it until the repair is complete (a killed repair is
finished by running it again).

The contract (DIR/spool.conf and the contract flags) parses the files of
done/ that have no record. --json prints the report as one JSON object;
with --repair, the repairs made are in it too, one line each, as
"repairs".`,
	opts: newOpts[fsckOpts],
}

// fsckOpts are spool fsck's.
type fsckOpts struct {
	dirOpts
	repair *bool
	asJSON *bool
	cf     *contractFlags
}

func (o *fsckOpts) flags(fs *flag.FlagSet) {
	o.repair = fs.Bool("repair", false, "repair what can be repaired without guessing")
	o.asJSON = fs.Bool("json", false, "print the report as JSON")
	o.cf = addContractFlags(fs)
	o.dirOpts.flags(fs)
}

func (o *fsckOpts) run(ctx context.Context, e *env) error {
	db := *o.db
	fo := queueopen.FsckOptions{Override: o.cf.override(), Repair: *o.repair, Audited: cliAudited(e)}
	// With --json the repairs go into the one JSON object, as "repairs",
	// so that stdout stays one value a tool can parse.
	var repairs []string
	if *o.repair {
		fo.Log = func(line string) { fmt.Fprintln(e.stdout, cell(line)) }
		if *o.asJSON {
			repairs = []string{}
			fo.Log = func(line string) { repairs = append(repairs, line) }
		}
	}
	r, err := queueopen.Fsck(ctx, o.dir, ledgerOpts{use: map[bool]ledgerUse{false: readLedger, true: writeLedger}[*o.repair]}.options(db), fo)
	switch {
	case errors.As(err, new(*queueopen.RefusalError)):
		return err
	case err != nil:
		return ledgerFailure(err, o.dir, db)
	}
	if *o.asJSON && repairs != nil {
		err = report.WriteJSON(e.stdout, struct {
			*fsck.Report
			Repairs []string `json:"repairs"`
		}{r, repairs})
		return checked(r, err)
	}
	return writeFsck(e, r, db, *o.asJSON)
}

// writeFsck prints the report of a check with --db db.
func writeFsck(e *env, r *fsck.Report, db string, asJSON bool) error {
	if asJSON {
		return checked(r, report.WriteJSON(e.stdout, r))
	}
	r.WriteText(e.stdout, queueopen.FsckLine(r.Queue, db))
	return checked(r, nil)
}

// checked is a report's end once printed (err, the failure to print):
// errCheckFailed when it holds a problem.
func checked(r *fsck.Report, err error) error {
	if err == nil && r.Problems() > 0 {
		return errCheckFailed
	}
	return err
}

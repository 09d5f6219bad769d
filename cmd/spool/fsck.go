package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spoolq/spool/fsck"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
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
}

func init() { fsckCommand.run = runFsck }

func runFsck(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	repair := flags.Bool("repair", false, "repair what can be repaired without guessing")
	asJSON := flags.Bool("json", false, "print the report as JSON")
	cf := addContractFlags(flags)
	db := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := e.positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	dir := pos[0]
	d, err := openQueue(dir)
	if err != nil {
		return err
	}
	defer closeQueue(d, &err)
	contract, err := cf.contract(dir)
	if err != nil {
		return err
	}
	if !*repair {
		if r := missingLedger(d, *db); r != nil {
			return writeFsck(e, r, *db, *asJSON)
		}
	}
	l, err := openLedgerWith(ctx, dir, *db, ledgerOpts{use: map[bool]ledgerUse{false: readLedger, true: writeLedger}[*repair]})
	if err != nil {
		if errors.Is(err, ledger.ErrNoLedger) {
			return refuse(err, "%s holds no spool ledger (is --db right?)", queueopen.LedgerName(dir, *db))
		}
		return err
	}
	defer closeLedger(l, &err)
	o := fsck.Options{Contract: contract}
	var r *fsck.Report
	// With --json the repairs go into the one JSON object, as "repairs",
	// so that stdout stays one value a tool can parse.
	var repairs []string
	if *repair {
		o.Log = func(line string) { fmt.Fprintln(e.stdout, cell(line)) }
		if *asJSON {
			repairs = []string{}
			o.Log = func(line string) { repairs = append(repairs, line) }
		}
		r, err = repairAudited(ctx, e, d, l, o)
	} else {
		r, err = fsck.Check(ctx, d, l, o)
	}
	if errors.Is(err, queue.ErrBadID) {
		return badIDError(err, dir, *db)
	}
	if err != nil {
		return err
	}
	if *asJSON && repairs != nil {
		return writeFsckJSON(e, r, repairs)
	}
	return writeFsck(e, r, *db, *asJSON)
}

// writeFsckJSON prints the report of a --repair as JSON, with the repairs
// made, one line each, under "repairs"; errCheckFailed when a problem is
// left.
func writeFsckJSON(e *env, r *fsck.Report, repairs []string) error {
	if err := report.WriteJSON(e.stdout, struct {
		*fsck.Report
		Repairs []string `json:"repairs"`
	}{r, repairs}); err != nil {
		return err
	}
	if r.Problems() > 0 {
		return errCheckFailed
	}
	return nil
}

// missingLedger reports a missing or empty SQLite ledger as a finding,
// without creating it; nil when the file is there.
func missingLedger(d *queue.Dir, db string) *fsck.Report {
	path, ok := queueopen.SQLiteFile(d.Path(), db)
	if !ok {
		return nil
	}
	fi, err := os.Stat(path)
	state := "does not exist"
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err == nil && fi.Mode().IsRegular() && fi.Size() == 0:
		state = "is an empty file"
	default:
		return nil // there, or an error the open will name
	}
	done, _ := d.Count(queue.Done)
	bad, _ := d.Count(queue.Error)
	return &fsck.Report{Queue: d.Path(), Findings: []fsck.Finding{{
		Kind: "ledger-missing", Count: done + bad,
		Text: fmt.Sprintf("the ledger %s %s%s: %d files in done/ and %d in error/ have no record; %s%s --repair rebuilds it",
			path, state, map[bool]string{true: " (is --db right?)"}[db != ""], done, bad,
			map[bool]string{true: "only if --db is right, "}[db != ""], fsckLine(d.Path(), db)),
	}}}
}

// writeFsck prints the report of a check with --db db; errCheckFailed when
// it holds a problem.
func writeFsck(e *env, r *fsck.Report, db string, asJSON bool) error {
	if asJSON {
		if err := report.WriteJSON(e.stdout, r); err != nil {
			return err
		}
	} else {
		for _, f := range r.Findings {
			line := fmt.Sprintf("%s: %s", f.Kind, f.Text)
			if f.Info {
				line = "info " + line
			}
			if len(f.Examples) > 0 {
				ex := make([]string, len(f.Examples))
				for i, x := range f.Examples {
					ex[i] = cell(x)
				}
				line += "; e.g. " + strings.Join(ex, ", ")
			}
			fmt.Fprintln(e.stdout, line)
		}
		if n := r.Problems(); n > 0 {
			fmt.Fprintf(e.stdout, "fsck %s: %d kinds of problem found (%s --repair fixes what it can)\n", cell(r.Queue), n, cell(fsckLine(r.Queue, db)))
		} else {
			fmt.Fprintf(e.stdout, "fsck %s: ok\n", cell(r.Queue))
		}
	}
	if r.Problems() > 0 {
		return errCheckFailed
	}
	return nil
}

// repairAudited is fsck.Repair, audited (action repair): counts repairs
// (one per line it logs) and problems (those left after it).
func repairAudited(ctx context.Context, e *env, d *queue.Dir, l *ledger.DB, o fsck.Options) (r *fsck.Report, err error) {
	var run *auditRun
	o.Begin = func(ctx context.Context) error {
		var err error
		run, err = beginAudit(ctx, e, l, "", auditRepair, nil)
		return err
	}
	repairs := int64(0)
	log := o.Log
	o.Log = func(line string) { repairs++; log(line) }
	r, err = fsck.Repair(ctx, d, l, o)
	if run == nil {
		return r, err // refused before any change: nothing to audit
	}
	defer run.end(ctx, e, &err)
	run.Counts["repairs"] = repairs
	if r != nil {
		run.Counts["problems"] = int64(r.Problems())
	}
	return r, err
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/spoolq/spool/fsck"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/report"
)

var fsckCommand = &cmdline.Command{
	Name:    "fsck",
	Args:    "DIR [--repair] [--json] [contract flags] [--db PATH]",
	Summary: "check that the ledger and the directories agree; --repair fixes what it can",
	Options: cmdline.New[fsckOpts],
}

// fsckOpts are spool fsck's.
type fsckOpts struct {
	dirOpts
	repair *bool
	asJSON *bool
	cf     *contractFlags
}

func (o *fsckOpts) Flags(fs *flag.FlagSet) {
	o.repair = fs.Bool("repair", false, "repair what can be repaired without guessing")
	o.asJSON = fs.Bool("json", false, "print the report as JSON")
	o.cf = addContractFlags(fs)
	o.dirOpts.Flags(fs)
}

func (o *fsckOpts) Run(ctx context.Context, e *env) error {
	db := *o.db
	fo := queueopen.FsckOptions{Override: o.cf.override(), Repair: *o.repair, Audited: cliAudited(e)}
	// With --json the repairs go into the one JSON object, as "repairs",
	// so that stdout stays one value a tool can parse.
	var repairs []string
	if *o.repair {
		fo.Log = func(line string) { fmt.Fprintln(e.Stdout, cell(line)) }
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
		err = report.WriteJSON(e.Stdout, struct {
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
		return checked(r, report.WriteJSON(e.Stdout, r))
	}
	r.WriteText(e.Stdout, queueopen.FsckLine(r.Queue, db))
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

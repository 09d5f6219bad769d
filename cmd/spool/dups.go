package main

import (
	"context"
	"flag"
	"io"

	"github.com/spoolq/spool/report"
)

var dupsCommand = &command{
	name:    "dups",
	args:    "DIR [-o FILE] [--conflicts] [--json] [--db PATH]",
	summary: "the msg_ids ignored as duplicates, distinct and ascending, one a line",
	help: `
Prints every msg_id that was delivered again after being processed, once
each, in ascending byte order, one a line. Nothing when there were none.

--conflicts lists instead the redeliveries whose content differs from the
processed message's (same msg_id, another body: a producer bug or
tampering), as CSV with the header
msg_id,processed_file,processed_hash,duplicate_file,duplicate_hash,at: one
row per conflicting delivery, by msg_id then time (RFC 3339 UTC), hashes
in hex SHA-256. Exit 1 when there is at least one, 0 with just the header
otherwise. A plain duplicate (same body) is not a conflict.

--json prints one JSON array instead: the msg_ids as strings, or with
--conflicts one object per row with the CSV's keys (and processed_file_b64,
duplicate_file_b64: the name's bytes in base64 when it is not UTF-8).
Text and CSV print a name holding a control character or bytes that are
not UTF-8 Go-quoted ("\x1b..."); --json carries it exactly.`,
	opts: newOpts[dupsOpts],
}

// dupsOpts are spool dups's.
type dupsOpts struct {
	reportOpts
	conflicts *bool
}

func (o *dupsOpts) flags(fs *flag.FlagSet) {
	o.conflicts = fs.Bool("conflicts", false, "CSV of the redeliveries whose body differs; exit 1 when there is one")
	o.bind(fs, "one JSON array: of msg_id strings, or with --conflicts of objects with the CSV's keys")
}

func (o *dupsOpts) run(ctx context.Context, e *env) (err error) {
	_, l, done, err := openBound(ctx, o.dir, *o.db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	if *o.conflicts {
		cs, err := l.Messages().Conflicts(ctx)
		if err != nil {
			return err
		}
		if err := e.output(*o.out, func(w io.Writer) error {
			if *o.asJSON {
				return report.WriteConflictsJSON(w, cs)
			}
			return report.WriteConflictsCSV(w, cs)
		}); err != nil {
			return err
		}
		if len(cs) > 0 {
			return errCheckFailed
		}
		return nil
	}
	ids, err := l.Messages().Duplicates(ctx)
	if err != nil {
		return err
	}
	return e.output(*o.out, func(w io.Writer) error {
		if *o.asJSON {
			return report.WriteDupsJSON(w, ids)
		}
		return report.WriteDups(w, ids)
	})
}

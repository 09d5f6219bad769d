package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"text/tabwriter"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/internal/sample"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/report"
)

var demoCommand = &command{
	name:    "demo",
	args:    "[DIR] [--db PATH] [contract flags]",
	summary: "create a queue with the lab's 20 sample messages, consume it and show the reports",
	help: `
Creates a queue (in DIR, which must be empty or absent; else in a new
temporary directory), writes the built-in sample into inbox/ (15 order events,
3 redeliveries by a producer that re-sent them, 1 truncated file, 1 event
without amount), consumes it, and shows what the reporting commands say.
The queue is left in place to explore with the other commands.`,
}

func init() { demoCommand.run = runDemo }

func runDemo(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	db := addDBFlag(flags)
	cf := addContractFlags(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := e.positionals(pos, 0, 1, "DIR"); err != nil {
		return err
	}
	var dir string
	if len(pos) == 1 {
		dir = pos[0]
		if err := checkEmpty(dir); err != nil {
			return err
		}
	} else if dir, err = os.MkdirTemp("", "spool-demo-"); err != nil {
		return err
	}
	if err := queue.Init(dir); err != nil {
		return err
	}
	d, err := openQueue(dir)
	if err != nil {
		return err
	}
	defer closeQueue(d, &err)
	c, err := cf.contract(dir)
	if err != nil {
		return err
	}
	l, err := openLedgerFor(ctx, d, *db, ledgerOpts{use: writeLedger})
	if err != nil {
		return err
	}
	defer closeLedger(l, &err)

	files := sample.Lab()
	for _, f := range files {
		if _, err := d.WriteFile(queue.Inbox, f.Name, f.Data); err != nil {
			return err
		}
	}
	consumer, err := spool.NewConsumer(d, l, spool.Config{Contract: c})
	if err != nil {
		return err
	}
	st, err := consumer.Drain(ctx)
	if err != nil {
		return err
	}
	status, err := report.Status(ctx, d, l)
	if err != nil {
		return err
	}
	dups, err := l.Duplicates(ctx)
	if err != nil {
		return err
	}
	dead, err := report.Errors(ctx, d, l)
	if err != nil {
		return err
	}
	problems, err := l.OrderCheck(ctx)
	if err != nil {
		return err
	}

	w := e.stdout
	fmt.Fprintf(w, "queue: %s\n", dir)
	fmt.Fprintf(w, "wrote %d sample messages into inbox/: %d order events, %d redeliveries of them, %d poison\n",
		len(files), sample.LabUnique, sample.LabDuplicates, sample.LabDeadLetters)
	fmt.Fprintf(w, "consumed: processed=%d duplicates=%d dead-letters=%d recovered=%d\n",
		st.Processed, st.Duplicates, st.DeadLetters, st.Recovered)

	fmt.Fprintf(w, "\n== stages\n")
	fmt.Fprintf(w, "inbox=%d processing=%d done=%d error=%d\n", status.Inbox, status.Processing, status.Done, status.Error)
	fmt.Fprintf(w, "\n== ledger\n")
	fmt.Fprintf(w, "%d rows in processed, %d duplicate deliveries, %d dead letters\n",
		status.Ledger.Processed, status.Ledger.Duplicates, status.Ledger.DeadLetters)

	fmt.Fprintf(w, "\n== duplicate msg_ids (spool dups DIR)\n")
	if err := report.WriteDups(w, dups); err != nil {
		return err
	}

	fmt.Fprintf(w, "\n== dead letters (spool errors DIR --detail)\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "file\treason\tdetail\n")
	for _, r := range dead {
		detail := r.Detail
		if r.Field != "" {
			detail = r.Field + ": " + detail
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.File, r.Reason, oneLine(detail))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\n== order check (spool order-check DIR)\n")
	if _, err := report.WriteOrderCheck(w, problems); err != nil {
		return err
	}

	fmt.Fprintf(w, "\n== lag (spool lag DIR 0)\n")
	fmt.Fprintf(w, "inbox=%d processing=%d error=%d\n", status.Inbox, status.Processing, status.Error)

	fmt.Fprintf(w, "\nnext, for example:\n")
	fmt.Fprintf(w, "  spool status %s\n", dir)
	if len(dead) > 0 {
		fmt.Fprintf(w, "  spool replay %s %s\n", dir, dead[len(dead)-1].File)
	}
	fmt.Fprintf(w, "  spool order-check --sql\n")
	return nil
}

// checkEmpty refuses a demo directory that holds anything: the demo must
// not mix its sample with someone's queue.
func checkEmpty(dir string) error {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return &usageError{msg: fmt.Sprintf("%s is not a directory; give an empty or absent DIR", dir)}
	}
	if _, err := f.Readdirnames(1); !errors.Is(err, io.EOF) {
		if err != nil {
			return err
		}
		return &usageError{msg: fmt.Sprintf("%s is not empty; give an empty or absent DIR, or none for a temporary one", dir)}
	}
	return nil
}

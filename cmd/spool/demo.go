package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/internal/sample"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/report"
)

var demoCommand = &cmdline.Command{
	Name:    "demo",
	Args:    "[DIR] [--db PATH] [--format csv] [contract flags]",
	Summary: "create a queue with the lab's 20 sample messages, consume it and show the reports",
	Options: cmdline.New[demoOpts],
}

// demoOpts are spool demo's: a DIR, or none for a temporary one.
type demoOpts struct {
	dirOpts
	cf     *contractFlags
	format *string
}

func (o *demoOpts) Flags(fs *flag.FlagSet) {
	o.dirOpts.Flags(fs)
	o.cf = addContractFlags(fs)
	o.format = fs.String("format", "", "write the sample as the rows of one batch file: `csv`")
}

func (o *demoOpts) Validate(e *env, pos []string) error {
	if *o.format != "" && *o.format != "csv" {
		return e.Usage("--format %q: want csv", *o.format)
	}
	if err := e.Positionals(pos, 0, 1, "DIR"); err != nil {
		return err
	}
	if len(pos) == 1 {
		o.dir = pos[0]
	}
	return nil
}

func (o *demoOpts) Run(ctx context.Context, e *env) (err error) {
	db, cf, format := o.db, o.cf, o.format
	dir := o.dir
	if dir != "" {
		if err := checkEmpty(dir); err != nil {
			return err
		}
	} else if dir, err = os.MkdirTemp("", "spool-demo-"); err != nil {
		return err
	}
	if err := queue.Init(dir); err != nil {
		return err
	}
	if *format != "" {
		if _, err := writeConfigFile(dir, []byte(`{"format": "csv"}`+"\n"), false); err != nil {
			return err
		}
	}
	d, err := openQueue(dir)
	if err != nil {
		return err
	}
	defer queueopen.CloseDir(d, &err)
	c, conf, err := cf.contractFrom(dir)
	if err != nil {
		return err
	}
	batchFiles, err := queueopen.Batch(d, conf, c)
	if err != nil {
		return err
	}
	l, err := openLedgerFor(ctx, d, *db, ledgerOpts{use: writeLedger})
	if err != nil {
		return err
	}
	defer closeLedger(l, &err)

	files := sample.Lab()
	if *format != "" {
		files = []sample.File{{Name: "orders.csv", Data: sample.LabCSV()}}
	}
	for _, f := range files {
		name, err := d.WriteFile(queue.Inbox, f.Name, f.Data)
		if err != nil {
			return err
		}
		// The sample was written long ago, as a backlog is: a file that
		// does not parse is then no file still being written.
		path := filepath.Join(d.StagePath(queue.Inbox), name)
		if err := os.Chtimes(path, sampleTime, sampleTime); err != nil {
			return err
		}
	}
	consumer, err := spool.NewConsumer(d, l.Consumer(), spool.Config{Contract: c, Batch: batchFiles})
	if err != nil {
		return err
	}
	st, err := consumer.Drain(ctx)
	if err != nil {
		return err
	}
	dead, err := report.Errors(ctx, d, l)
	if err != nil {
		return err
	}

	w := e.Stdout
	fmt.Fprintf(w, "queue: %s\n", dir)
	what := fmt.Sprintf("%d sample messages", sample.LabMessages)
	if *format != "" {
		what = fmt.Sprintf("%d sample messages as the rows of %s", sample.LabMessages, files[0].Name)
	}
	fmt.Fprintf(w, "wrote %s into inbox/: %d order events, %d redeliveries of them, %d poison\n",
		what, sample.LabUnique, sample.LabDuplicates, sample.LabDeadLetters)
	// What consume prints on stdout; the demo drains in-process, without
	// consume's log on stderr.
	fmt.Fprintf(w, "\n$ spool consume %s\n", dir)
	fmt.Fprintf(w, "processed=%d duplicates=%d dead-letters=%d recovered=%d\n",
		st.Processed, st.Duplicates, st.DeadLetters, st.Recovered)
	// The reports are the commands themselves, run on the same stdout: a
	// table where a terminal gets one, as each command decides.
	var dbArgs []string
	if *db != "" {
		dbArgs = []string{"--db", *db}
	}
	for _, args := range [][]string{
		{"status", dir}, {"dups", dir}, {"errors", dir, "--detail"}, {"order-check", dir}, {"lag", dir, "0"},
	} {
		if args[0] != "lag" { // lag reads no ledger
			args = append(args, dbArgs...)
		}
		fmt.Fprintf(w, "\n$ spool %s\n", strings.Join(args, " "))
		if code := run(ctx, args, nil, w, e.Stderr); code != exitOK {
			return fmt.Errorf("demo: spool %s: exit %d", args[0], code)
		}
	}

	fmt.Fprintf(w, "\nnext, for example:\n")
	if len(dead) > 0 {
		fmt.Fprintf(w, "  spool show %s %s\n", dir, dead[len(dead)-1].File)
		fmt.Fprintf(w, "  spool replay %s %s\n", dir, dead[len(dead)-1].File)
	}
	fmt.Fprintf(w, "  spool check %s\n", dir)
	fmt.Fprintf(w, "  spool order-check --sql\n")
	return nil
}

// sampleTime is when the demo's sample files were written, as far as
// their modification time says: the day of the lab's EAI hand-off.
var sampleTime = time.Date(2024, 6, 11, 9, 0, 0, 0, time.UTC)

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
		return &cmdline.UsageError{Msg: fmt.Sprintf("%s is not a directory; give an empty or absent DIR", dir)}
	}
	if _, err := f.Readdirnames(1); !errors.Is(err, io.EOF) {
		if err != nil {
			return err
		}
		return &cmdline.UsageError{Msg: fmt.Sprintf("%s is not empty; give an empty or absent DIR, or none for a temporary one", dir)}
	}
	return nil
}

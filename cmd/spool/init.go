package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queueopen"
)

var initCommand = &cmdline.Command{
	Name:    "init",
	Args:    "DIR [contract and format flags [--force]] [--from SRC] [--db PATH]",
	Summary: "create a queue, its ledger and its spool.conf; optionally copy the messages of SRC into inbox/",
	Options: cmdline.New[initOpts],
}

// initOpts are spool init's.
type initOpts struct {
	dirOpts
	from      *string
	newLedger *bool
	cf        *contractFlags
	ff        *formatFlags
	force     *bool
	// conf is the spool.conf the contract flags write, nil without them.
	conf []byte
}

func (o *initOpts) Flags(flags *flag.FlagSet) {
	o.from = flags.String("from", "", "copy the message files of directory `SRC` into inbox/")
	o.dirOpts.Flags(flags)
	o.newLedger = addNewLedgerFlag(flags)
	o.cf = addContractFlags(flags)
	o.ff = addFormatFlags(flags)
	o.force = flags.Bool("force", false, "with contract or format flags: replace a DIR/spool.conf that holds another contract or format")
}

// validate refuses before anything is created, so that a refusal changes
// nothing: a contract that differs from DIR/spool.conf's without --force,
// a --from that is no directory.
func (o *initOpts) Validate(e *env, pos []string) (err error) {
	if err := o.dirOpts.Validate(e, pos); err != nil {
		return err
	}
	dir := o.dir
	o.conf, err = o.cf.configFile(o.ff)
	if err != nil {
		return e.Usage("%v", err)
	}
	if *o.force && o.conf == nil {
		return e.Usage("--force needs contract or format flags: it replaces the spool.conf they write")
	}
	if o.conf != nil {
		// Refuse before creating anything, so that a refusal changes
		// nothing.
		if exists, same, err := queueopen.SameConfig(dir, o.conf); err != nil {
			return err
		} else if exists && !same && !*o.force {
			_, err := writeConfigFile(dir, o.conf, false)
			return err
		}
	}
	// Check the source before creating anything, so a typo changes nothing.
	if *o.from != "" {
		fi, err := os.Stat(*o.from)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return &inputError{path: *o.from, err: errors.New("no such directory")}
		case err != nil:
			return fmt.Errorf("--from: %w", err)
		case !fi.IsDir():
			return e.Usage("--from %s: not a directory", *o.from)
		}
	}
	return nil
}

func (o *initOpts) Run(ctx context.Context, e *env) (err error) {
	dir, from, db, newLedger, force, conf := o.dir, o.from, o.db, o.newLedger, o.force, o.conf
	d, err := queueopen.Init(ctx, dir, ledgerOpts{use: writeLedger, newLedger: *newLedger}.options(*db))
	if err != nil {
		return ledgerFailure(err, dir, *db)
	}
	defer queueopen.CloseDir(d, &err)
	head := "initialized " + dir
	if conf != nil {
		wrote, err := writeConfigFile(dir, conf, *force)
		if err != nil {
			return err
		}
		if wrote {
			head += "; wrote " + filepath.Join(dir, configName)
			// --from copies the files of the format just written, not
			// those of the spool.conf the queue was opened with.
			c, err := queueopen.ReadConfig(dir)
			if err != nil {
				return err
			}
			queueopen.UseFormat(d, c)
		}
	}
	if *from == "" {
		fmt.Fprintln(e.Stdout, head)
		return nil
	}
	copied, skipped, err := queueopen.CopyMessages(d, *from, func(path string, why error) { e.Warn("skipped %s: %v", path, why) })
	if err != nil {
		return err
	}
	noun := "messages"
	if copied == 1 {
		noun = "message"
	}
	line := fmt.Sprintf("%s; copied %d %s from %s into inbox/", head, copied, noun, *from)
	if skipped > 0 {
		line += fmt.Sprintf(", skipped %d", skipped)
	}
	fmt.Fprintln(e.Stdout, line)
	if skipped > 0 {
		return errCheckFailed
	}
	return nil
}

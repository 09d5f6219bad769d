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
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
)

var enqueueCommand = &cmdline.Command{
	Name:    "enqueue",
	Args:    "DIR FILE...",
	Summary: "the safe producer: copy files into inbox/ atomically (temp file, fsync, rename)",
	Options: cmdline.New[enqueueOpts],
}

// enqueueOpts are spool enqueue's: the queue and the files.
type enqueueOpts struct {
	dir  string
	srcs []string
}

func (*enqueueOpts) Flags(*flag.FlagSet) {}

func (o *enqueueOpts) Validate(e *env, pos []string) error {
	if len(pos) == 0 {
		return e.Usage("missing DIR")
	}
	if len(pos) == 1 {
		return e.Usage("missing FILE")
	}
	o.dir, o.srcs = pos[0], pos[1:]
	return nil
}

func (o *enqueueOpts) Run(_ context.Context, e *env) (err error) {
	d, err := openQueue(o.dir)
	if err != nil {
		return err
	}
	defer queueopen.CloseDir(d, &err)
	for _, src := range o.srcs {
		if err := checkSource(d, src); err != nil {
			return err
		}
	}
	// The temp files of an enqueue killed before its rename would
	// otherwise stay, full size, with nothing to remove them.
	removed, err := d.RemoveStaleTemps()
	for _, t := range removed {
		e.Warn("removed %s, a temp file a killed writer left (%d bytes)", t.Path(), t.Size)
	}
	if err != nil {
		return err
	}
	for _, src := range o.srcs {
		name, err := d.Enqueue(src)
		if err != nil {
			return err
		}
		fmt.Fprintln(e.Stdout, cell(name))
	}
	return nil
}

// checkSource refuses a file that could not be enqueued, before anything
// is copied.
func checkSource(d *queue.Dir, src string) error {
	if !d.Takes(filepath.Base(src)) {
		return fmt.Errorf("%s: %w", src, d.NameRefusal())
	}
	fi, err := os.Stat(src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &inputError{path: src, err: errors.New("no such file")}
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return &cmdline.UsageError{Msg: fmt.Sprintf("%s: not a regular file (%s)", src, queue.ModeType(fi.Mode()))}
	}
	return nil
}

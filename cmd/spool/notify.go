package main

import (
	"errors"
	"flag"
	"time"

	"github.com/spoolq/spool/handler"
)

// notifyFlags are consume's flags for telling an operator about dead
// letters.
type notifyFlags struct {
	fs      *flag.FlagSet
	command string
	timeout time.Duration
}

// addNotifyFlags registers --on-dead-letter and its timeout on fs.
func addNotifyFlags(fs *flag.FlagSet) *notifyFlags {
	nf := &notifyFlags{fs: fs}
	fs.StringVar(&nf.command, "on-dead-letter", "", "run `CMD` with /bin/sh -c after a message lands in error/ (SPOOL_FILE, SPOOL_REASON, SPOOL_DETAIL, SPOOL_QUEUE); its failure is only logged")
	fs.DurationVar(&nf.timeout, "on-dead-letter-timeout", handler.DefaultNotifyTimeout, "kill an --on-dead-letter command (its process group) after `DURATION`")
	return nf
}

// warnNotify prints a notifier's failure as one line on stderr.
func warnNotify(e *env, err error) {
	var ne *handler.NotifyError
	switch {
	case errors.As(err, &ne) && errors.Is(err, handler.ErrBacklog):
		e.Warn("on-dead-letter: %s %v", ne.File, ne.Err)
	case errors.As(err, &ne):
		e.Warn("on-dead-letter %s: %v", ne.File, ne.Err)
	default:
		e.Warn("on-dead-letter: %v", err)
	}
}

package queueopen

import (
	"fmt"
	"strings"
	"time"

	"github.com/spoolq/spool/handler"
)

// MinLease is the shortest ConsumeOptions.Lease: the lease is renewed
// every third of it, and a renewal must fit in that third.
const MinLease = 3 * time.Second

// given reports whether the program's user gave the option name
// (ConsumeOptions.Given); false without Given.
func (o *ConsumeOptions) given(name string) bool { return o.Given != nil && o.Given(name) }

// Check refuses, before anything is opened, the options of the run itself
// that cannot make one, the first wrong in this order: Workers,
// BatchSize or ShutdownTimeout negative, Poll negative, given as zero, or
// set without Watch, MinAge negative, Lease under MinLease (zero is the
// default unless given), and Tokens (or the auth option given) without
// Listen.Addr. Its errors are *handler.OptionError, naming the option as
// the command line's flag. CheckWork checks the rest; spool consume
// checks its --durability between the two.
func (o *ConsumeOptions) Check() error {
	switch {
	case o.Workers < 0:
		return refuse("--workers %d: want 0 (default) or more", o.Workers)
	case o.BatchSize < 0:
		return refuse("--batch %d: want 0 (default) or more", o.BatchSize)
	case o.ShutdownTimeout < 0:
		return refuse("--shutdown-timeout %v: want 0 (no bound) or a positive duration", o.ShutdownTimeout)
	case o.Poll < 0 || (o.given("poll") && o.Poll == 0) || (o.Poll > 0 && !o.Watch):
		return refuse("--poll %v: want a positive interval, with --watch", o.Poll)
	case o.MinAge < 0:
		return refuse("--min-age %v: want 0 (off) or more", o.MinAge)
	case (o.Lease != 0 || o.given("lease")) && o.Lease < MinLease:
		return refuse("--lease %v: want %v or more (it is renewed every third of it)", o.Lease, MinLease)
	case (o.given("auth") || o.Tokens != nil) && o.Listen.Addr == "":
		return refuse("--auth needs --listen: the API and the console are served at its address")
	}
	return nil
}

// CheckWork refuses, before anything is opened, what the run would do
// with the messages that cannot be done, the first wrong in this order:
// the format (Format.Check, a *FormatFlagError), the handler
// (Handler.Check, given Lease, which its timeouts must stay under; a
// *handler.OptionError), and the dead-letter notification (OnDeadLetter
// given but blank, OnDeadLetterTimeout not positive where it is used or
// given; a *handler.OptionError).
func (o *ConsumeOptions) CheckWork() error {
	if err := o.Format.Check(); err != nil {
		return err
	}
	o.Handler.Lease = o.Lease
	if err := o.Handler.Check(); err != nil {
		return err
	}
	if o.given("on-dead-letter") && strings.TrimSpace(o.OnDeadLetter) == "" {
		return refuse("--on-dead-letter is empty")
	}
	if o.OnDeadLetterTimeout < 0 || (o.OnDeadLetterTimeout == 0 && (o.OnDeadLetter != "" || o.given("on-dead-letter-timeout"))) {
		return refuse("--on-dead-letter-timeout %v: want a positive duration", o.OnDeadLetterTimeout)
	}
	return nil
}

// refuse is a *handler.OptionError of the options' combination.
func refuse(format string, args ...any) error {
	return &handler.OptionError{Msg: fmt.Sprintf(format, args...)}
}

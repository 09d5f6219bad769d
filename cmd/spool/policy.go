package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/task"
)

var policyCommand = &cmdline.Command{
	Name:    "policy",
	Args:    "show|set DIR [replay_over=N] [discard_over=N] [--json] [--db PATH]",
	Summary: "show or set the queue's approval policy (four eyes), which its ledger holds",
	Options: cmdline.New[policyOpts],
}

// policyOpts are spool policy's: show or set, the queue, and set's
// settings.
type policyOpts struct {
	set      bool
	dir      string
	settings []string
	asJSON   *bool
	db       *string
}

func (o *policyOpts) Flags(fs *flag.FlagSet) {
	o.asJSON = fs.Bool("json", false, "show: print the policy as one JSON object")
	o.db = addDBFlag(fs)
}

func (o *policyOpts) Validate(e *env, pos []string) error {
	if len(pos) == 0 {
		return e.Usage("missing show or set")
	}
	switch pos[0] {
	case "show":
		if err := e.Positionals(pos[1:], 1, 1, "DIR"); err != nil {
			return err
		}
		o.dir = pos[1]
		return nil
	case "set":
		if len(pos) < 3 {
			return e.Usage("want spool policy set DIR replay_over=N discard_over=N (one setting at least)")
		}
		if e.Given("json") {
			return e.Usage("--json is for spool policy show")
		}
		o.set, o.dir, o.settings = true, pos[1], pos[2:]
		return nil
	}
	return e.Usage("%q: want show or set", pos[0])
}

func (o *policyOpts) Run(ctx context.Context, e *env) error {
	if o.set {
		return setPolicy(ctx, e, o.dir, *o.db, o.settings)
	}
	return showPolicy(ctx, e, o.dir, *o.db, *o.asJSON)
}

// policyUsage words a spool.conf approval section that differs from the
// ledger's policy (task.ErrPolicyMismatch) as a usage error (exit 2).
func policyUsage(err error) error {
	if errors.Is(err, task.ErrPolicyMismatch) {
		return &cmdline.UsageError{Msg: err.Error()}
	}
	return err
}

func showPolicy(ctx context.Context, e *env, dir, db string, asJSON bool) (err error) {
	st, err := queueopen.ReadPolicy(ctx, dir, queueopen.Options{DB: db})
	if err != nil {
		return policyFailure(err, dir, db)
	}
	if asJSON {
		if err := task.WritePolicyJSON(e.Stdout, st.Ledger, st.Conf); err != nil {
			return err
		}
	} else {
		task.WritePolicy(e.Stdout, st.Ledger, st.Conf, st.File)
	}
	if st.Differs() {
		e.Warn("the approval section of %s (%s) differs from the ledger's policy (%s): commands refuse (exit 2) until it says the same or is removed",
			st.File, st.Conf.Settings(), st.Ledger.Settings())
		return errCheckFailed
	}
	return nil
}

func setPolicy(ctx context.Context, e *env, dir, db string, settings []string) (err error) {
	o := ledgerOpts{use: writeLedger}.options(db)
	from, now, err := queueopen.ChangePolicy(ctx, dir, o, currentOperator(), settings)
	switch {
	case errors.Is(err, ledger.ErrPolicyChanged):
		return fmt.Errorf("%w: nothing was changed; run it again to change the policy as it is now", err)
	case errors.Is(err, task.ErrBadRequest):
		return e.Usage("%v", err)
	case err != nil:
		return policyFailure(err, dir, db)
	}
	fmt.Fprintf(e.Stdout, "approval policy: %s -> %s\n", from.Settings(), now.Ledger.Settings())
	if now.Conf.Set && now.Conf != now.Ledger.Policy {
		e.Warn("the approval section of %s (%s) differs from the ledger's policy now: commands refuse (exit 2) until it says %s or is removed",
			now.File, now.Conf.Settings(), now.Ledger.Settings())
	}
	return nil
}

// policyFailure words a refusal of the ledger (ledgerFailure), leaving
// spool.conf's errors and the identity's as they are.
func policyFailure(err error, dir, db string) error {
	if errors.As(err, new(*queueopen.ConfigError)) || errors.As(err, new(*task.IdentityError)) {
		return err
	}
	return ledgerFailure(err, dir, db)
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/task"
)

var policyCommand = &command{
	name:    "policy",
	args:    "show|set DIR [replay_over=N] [discard_over=N] [--json] [--db PATH]",
	summary: "show or set the queue's approval policy (four eyes), which its ledger holds",
	help: `
The approval policy says how many files a replay, a discard, may select
before it waits for spool approve by another person: replay_over=N,
discard_over=N (N files; none: no approval for that kind; 0: every one).
Under a policy every replay and discard is a task (spool tasks), and
--by may name only the OS user.

The policy is the ledger's, not a file's: the first time a replay,
discard, approve, cancel, resume or serve --auth sees an "approval"
section in DIR/spool.conf while the ledger holds none, the ledger adopts
it (an audit row). From then on moving or deleting spool.conf changes
nothing, and a section that says otherwise than the ledger is refused
(exit 2, naming both) until it is made the same or removed.

spool policy show DIR prints the ledger's policy, who set it and when,
and exits 1 when spool.conf's section differs from it; --json for a
script.

spool policy set DIR replay_over=N discard_over=N changes it (a key left
out keeps its value), as the OS user, an approver on the command line
(a uid without a passwd name is refused, exit 2), with an audit row that
holds the old and the new values, written in the transaction that
changes it. It prints "approval policy: OLD -> NEW".`,
}

func init() { policyCommand.run = runPolicy }

func runPolicy(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	asJSON := flags.Bool("json", false, "show: print the policy as one JSON object")
	db := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return e.usage("missing show or set")
	}
	switch pos[0] {
	case "show":
		if err := e.positionals(pos[1:], 1, 1, "DIR"); err != nil {
			return err
		}
		return showPolicy(ctx, e, pos[1], *db, *asJSON)
	case "set":
		if len(pos) < 3 {
			return e.usage("want spool policy set DIR replay_over=N discard_over=N (one setting at least)")
		}
		if given(flags, "json") {
			return e.usage("--json is for spool policy show")
		}
		return setPolicy(ctx, e, pos[1], *db, pos[2:])
	}
	return e.usage("%q: want show or set", pos[0])
}

// confPolicy is the approval section of the queue at dir's spool.conf,
// read strictly with the rest of the file (Set false when it has none),
// and the file's path.
func confPolicy(dir string) (task.Policy, string, error) {
	path := filepath.Join(dir, configName)
	c, err := queueopen.ReadConfig(dir) // every key checked, "approval" among them
	if err != nil || c == nil || c.Approval == nil {
		return task.NoPolicy, path, err
	}
	p, err := task.ParsePolicy(c.Approval)
	if err != nil {
		return task.NoPolicy, path, &queueopen.ConfigError{Path: path, Err: err, Invalid: true}
	}
	return p, path, nil
}

// openPolicyLedger opens the queue at dir and its ledger for writing
// (write), or else for reading: read-only when the ledger's schema is
// current, as a reader who may not write it needs, else as the reports
// open it, to migrate it.
func openPolicyLedger(ctx context.Context, dir, db string, write bool) (*ledger.DB, func(*error), error) {
	o := ledgerOpts{use: writeLedger}
	if !write {
		o = ledgerOpts{use: readLedger, readOnly: true}
	}
	_, l, done, err := openBound(ctx, dir, db, o)
	if err != nil && !write {
		_, l, done, err = openBound(ctx, dir, db, ledgerOpts{use: readLedger})
	}
	return l, done, err
}

// ledgerPolicy is the policy of the queue at dir, its ledger l open for
// writing already (a task service's, serve's): the ledger's, which adopts
// spool.conf's section the first time it sees one (queuePolicy).
func ledgerPolicy(ctx context.Context, dir string, l *ledger.DB) (task.Policy, error) {
	conf, file, err := confPolicy(dir)
	if err != nil {
		return task.NoPolicy, err
	}
	return queuePolicy(ctx, l, conf, file, true)
}

// queuePolicy is the queue's policy from its ledger l and the approval
// section conf of its spool.conf at file (task.Service.QueuePolicy), as
// the OS user running spool.
func queuePolicy(ctx context.Context, l *ledger.DB, conf task.Policy, file string, adopt bool) (task.Policy, error) {
	s := &task.Service{Ledger: l, Host: queue.Host(), PID: os.Getpid()}
	p, err := s.QueuePolicy(ctx, currentOperator().identity(), conf, file, adopt)
	if errors.Is(err, task.ErrPolicyMismatch) {
		return p, &usageError{msg: err.Error()}
	}
	return p, err
}

// policyJSON is spool policy show --json.
type policyJSON struct {
	// Policy is the ledger's, null when it holds none; each limit null
	// for none.
	Policy *policyLimits `json:"policy"`
	SetBy  string        `json:"set_by,omitempty"`
	SetAt  *time.Time    `json:"set_at,omitempty"`
	Source string        `json:"source,omitempty"`
	// Config is spool.conf's approval section, null when it has none;
	// Matches whether it is the ledger's policy (true without one).
	Config  *policyLimits `json:"config"`
	Matches bool          `json:"config_matches"`
}

type policyLimits struct {
	ReplayOver  *int `json:"replay_over"`
	DiscardOver *int `json:"discard_over"`
}

func limitsOf(p task.Policy) *policyLimits {
	if !p.Set {
		return nil
	}
	limit := func(n int) *int {
		if n < 0 {
			return nil
		}
		return &n
	}
	return &policyLimits{ReplayOver: limit(p.ReplayOver), DiscardOver: limit(p.DiscardOver)}
}

func showPolicy(ctx context.Context, e *env, dir, db string, asJSON bool) (err error) {
	conf, file, err := confPolicy(dir)
	if err != nil {
		return err
	}
	l, done, err := openPolicyLedger(ctx, dir, db, false)
	if err != nil {
		return err
	}
	defer done(&err)
	rec, err := task.LedgerPolicy(ctx, l)
	if err != nil {
		return err
	}
	matches := !rec.Set || !conf.Set || conf == rec.Policy
	if asJSON {
		out := policyJSON{Policy: limitsOf(rec.Policy), Config: limitsOf(conf), Matches: matches}
		if rec.Set {
			at := rec.SetAt.UTC()
			out.SetBy, out.SetAt, out.Source = rec.SetBy, &at, rec.Source
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		switch {
		case rec.Set:
			how := "spool policy set"
			if rec.Source == ledger.PolicyFromConfig {
				how = "adopted from " + configName
			}
			fmt.Fprintf(e.stdout, "%s\nset by %s at %s (%s)\n", rec.Settings(), cell(rec.SetBy), rec.SetAt.UTC().Format(time.RFC3339), how)
		case conf.Set:
			fmt.Fprintf(e.stdout, "%s\nnot in the ledger yet: the approval section of %s, adopted by the next replay, discard or approve\n", conf.Settings(), file)
		default:
			fmt.Fprintln(e.stdout, "no policy: replays and discards need no approval")
		}
	}
	if !matches {
		e.warn("the approval section of %s (%s) differs from the ledger's policy (%s): commands refuse (exit 2) until it says the same or is removed",
			file, conf.Settings(), rec.Settings())
		return errCheckFailed
	}
	return nil
}

func setPolicy(ctx context.Context, e *env, dir, db string, settings []string) (err error) {
	conf, file, err := confPolicy(dir)
	if err != nil {
		return err
	}
	// Checked before anything is opened: a typo changes nothing.
	var probe task.Policy
	for _, s := range settings {
		if probe, err = probe.With(s); err != nil {
			return e.usage("%v", err)
		}
	}
	_, l, done, err := openBound(ctx, dir, db, ledgerOpts{use: writeLedger})
	if err != nil {
		return err
	}
	defer done(&err)
	s := &task.Service{Ledger: l, Host: queue.Host(), PID: os.Getpid()}
	// Always a named OS user: who changes four eyes must be someone.
	who, err := cliIdentity(ctx, s, task.PolicyAction, "", true)
	if err != nil {
		return err
	}
	from, err := task.LedgerPolicy(ctx, l)
	if err != nil {
		return err
	}
	to := from.Policy
	if !from.Set && conf.Set {
		// Not adopted yet: the section is what the queue has, and the
		// settings change that.
		to = conf
	}
	for _, set := range settings {
		if to, err = to.With(set); err != nil {
			return e.usage("%v", err)
		}
	}
	now, err := s.SetPolicy(ctx, who, from, to)
	if errors.Is(err, ledger.ErrPolicyChanged) {
		return fmt.Errorf("%w: nothing was changed; run it again to change the policy as it is now", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "approval policy: %s -> %s\n", from.Settings(), now.Settings())
	if conf.Set && conf != now.Policy {
		e.warn("the approval section of %s (%s) differs from the ledger's policy now: commands refuse (exit 2) until it says %s or is removed",
			file, conf.Settings(), now.Settings())
	}
	return nil
}

package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/spoolq/spool/hold"
	"github.com/spoolq/spool/queue"
)

var holdCommand = &command{
	name:    "hold",
	args:    "DIR [FILE...] [--msg-id ID]... [--note TEXT] [--db PATH]",
	summary: "hold messages aside: files of inbox/ into held/, msg_ids from every consumer (postsuper -h)",
	help: `
Holds messages aside until spool release (docs/DESIGN.md, "Pause and
hold"), as Postfix's postsuper -h does: the rest of the queue goes on.

Each FILE, a message's name in inbox/, is moved into DIR/held/ (suffixed
~N on a collision, as every move is) and recorded with who held it, when
and why; no consumer scans held/, so it is never claimed there. A FILE no
longer in inbox/ (a consumer claimed it first: hold its msg_id instead, or
it never was there) is said on stderr, and the exit status is then 1;
the others are held all the same.

Each --msg-id ID (repeatable) is held in the ledger: within about a
second every consumer, on every host, moves each delivery of it into
held/ when it reads it, instead of processing it, until the msg_id is
released; files of it already in inbox/ are held as they are claimed. A
delivery a consumer has read already when the hold arrives is processed.
One processed already is said (its later deliveries are held). Holding a
message of an order key takes it out of that key's sequence until it is
released (order-check reports the gap meanwhile); a retry waiting for its
time is held when it falls due.

--note TEXT says why. Every hold is an audit row (action hold). spool
holds DIR lists what is held, spool status counts it.`,
	opts: newOpts[holdOpts],
}

var releaseCommand = &command{
	name:    "release",
	args:    "DIR [FILE...] [--msg-id ID]... [--db PATH]",
	summary: "release held messages back into inbox/ (postsuper -H)",
	help: `
Releases what spool hold held. Each FILE, a file's name in held/ (or the
name it had in inbox/, when one held file had it), goes back into inbox/
under the name it had there (suffixed ~N on a collision), to be consumed
as if it had just arrived. A FILE whose msg_id is still held is refused:
release the msg_id instead.

Each --msg-id ID ends that msg_id's hold, and every file held under it
goes back into inbox/.

Prints each file released with its name in inbox/. A name or msg_id that
is not held is said on stderr, and the exit status is then 1; the others
are released all the same. Every release is an audit row (action
release).`,
	opts: newOpts[releaseOpts],
}

var holdsCommand = &command{
	name:    "holds",
	args:    "DIR [--json] [--db PATH]",
	summary: "what is held back: the pause, the msg_ids held and the files in held/",
	help: `
Lists what an operator holds back from the queue's consumers: whether the
queue is paused (by whom, since when, why), the msg_ids held, and the
files in held/, each with the name it had in inbox/, its msg_id, who held
it, when and why (a msg_id's hold: the consumer set it aside). A file in
held/ without a record (a hold killed between its move and its record, or
a file put there by hand) is listed as such: it is held all the same, and
spool release DIR FILE releases it. It changes nothing.

--json prints one object: paused (null, or {by, role, via, note, at}),
msg_ids [{msg_id, by, role, via, note, at}], files [{file, origin,
msg_id, cause, by, role, via, note, at, size, recorded}], and
stale_records (records whose file is gone from held/: removed by hand,
which spool fsck reports).`,
	opts: newOpts[holdsOpts],
}

// holdArgs are the options of hold and release: DIR [FILE...] and
// --msg-id ..., with hold's --note.
type holdArgs struct {
	dir  string
	r    hold.Request
	note *string
	cf   *contractFlags
	db   *string
}

func (o *holdArgs) flags(fs *flag.FlagSet) {
	fs.Func("msg-id", "hold (release) the msg_id `ID`; repeat it for more", func(v string) error {
		o.r.MsgIDs = append(o.r.MsgIDs, v)
		return nil
	})
	o.cf = addContractFlags(fs)
	o.db = addDBFlag(fs)
}

func (o *holdArgs) validate(e *env, pos []string) error {
	if err := e.positionals(pos, 1, -1, "DIR"); err != nil {
		return err
	}
	o.dir, o.r.Files = pos[0], pos[1:]
	if len(o.r.Files) == 0 && len(o.r.MsgIDs) == 0 {
		return e.usage("name a FILE or a --msg-id ID")
	}
	for _, f := range o.r.Files {
		if err := queue.CheckName(f); err != nil {
			return e.usage("%v: FILE is a file's name in the stage, not a path", err)
		}
	}
	if o.note != nil {
		o.r.Note = *o.note
	}
	return nil
}

// holdOpts are spool hold's.
type holdOpts struct{ holdArgs }

func (o *holdOpts) flags(fs *flag.FlagSet) {
	o.note = fs.String("note", "", "why they are held (`TEXT`)")
	o.holdArgs.flags(fs)
}

func (o *holdOpts) run(ctx context.Context, e *env) (err error) {
	s, done, err := holdService(ctx, o.dir, *o.db, o.cf, ledgerOpts{use: writeLedger})
	if err != nil {
		return err
	}
	defer done(&err)
	res, err := s.Hold(ctx, currentOperator().Identity(), o.r)
	if err != nil {
		return err
	}
	for _, it := range res.Items {
		switch {
		case it.File != "" && it.Done:
			fmt.Fprintf(e.stdout, "held %s as held/%s\n", cell(it.File), cell(it.Name))
		case it.MsgID != "" && (it.Done || it.Why == hold.HeldAlready):
			line := "msg_id " + cell(it.MsgID) + " held"
			if !it.Done {
				line += " already"
			}
			if it.Processed != nil {
				line += fmt.Sprintf(" (processed already at %s: its later deliveries are held)", it.Processed.Format(time.RFC3339))
			}
			fmt.Fprintln(e.stdout, line)
		default:
			e.warn("%s: %s", cell(it.File), it.Why)
		}
	}
	if res.Unmet() > 0 {
		return errCheckFailed
	}
	return nil
}

// releaseOpts are spool release's.
type releaseOpts struct{ holdArgs }

func (o *releaseOpts) run(ctx context.Context, e *env) (err error) {
	s, done, err := holdService(ctx, o.dir, *o.db, o.cf, ledgerOpts{use: writeLedger})
	if err != nil {
		return err
	}
	defer done(&err)
	res, err := s.Release(ctx, currentOperator().Identity(), o.r)
	if err != nil {
		return err
	}
	for _, it := range res.Items {
		switch {
		case it.MsgID != "":
			if it.Done {
				fmt.Fprintf(e.stdout, "msg_id %s released\n", cell(it.MsgID))
			} else {
				e.warn("msg_id %s: %s", cell(it.MsgID), it.Why)
			}
			for _, f := range it.Released {
				if f.Done {
					fmt.Fprintf(e.stdout, "released held/%s as inbox/%s\n", cell(f.File), cell(f.Name))
				}
			}
		case it.Done:
			fmt.Fprintf(e.stdout, "released %s as inbox/%s\n", cell(it.File), cell(it.Name))
		default:
			e.warn("%s: %s", cell(it.File), it.Why)
		}
	}
	if res.Missing > 0 {
		return errCheckFailed
	}
	return nil
}

// holdsOpts are spool holds's.
type holdsOpts struct {
	dirOpts
	asJSON *bool
	cf     *contractFlags
}

func (o *holdsOpts) flags(fs *flag.FlagSet) {
	o.asJSON = fs.Bool("json", false, "one JSON object (see above)")
	o.cf = addContractFlags(fs)
	o.dirOpts.flags(fs)
}

func (o *holdsOpts) run(ctx context.Context, e *env) (err error) {
	s, done, err := holdService(ctx, o.dir, *o.db, o.cf, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	st, err := s.State(ctx)
	if err != nil {
		return err
	}
	if *o.asJSON {
		return e.output("", st.WriteJSON)
	}
	return e.output("", st.WriteText)
}

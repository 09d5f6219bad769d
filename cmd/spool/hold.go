package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/spoolq/spool/hold"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queue"
)

var holdCommand = &cmdline.Command{
	Name:    "hold",
	Args:    "DIR [FILE...] [--msg-id ID]... [--note TEXT] [--db PATH]",
	Summary: "hold messages aside: files of inbox/ into held/, msg_ids from every consumer (postsuper -h)",
	Options: cmdline.New[holdOpts],
}

var releaseCommand = &cmdline.Command{
	Name:    "release",
	Args:    "DIR [FILE...] [--msg-id ID]... [--db PATH]",
	Summary: "release held messages back into inbox/ (postsuper -H)",
	Options: cmdline.New[releaseOpts],
}

var holdsCommand = &cmdline.Command{
	Name:    "holds",
	Args:    "DIR [--json] [--db PATH]",
	Summary: "what is held back: the pause, the msg_ids held and the files in held/",
	Options: cmdline.New[holdsOpts],
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

func (o *holdArgs) Flags(fs *flag.FlagSet) {
	fs.Func("msg-id", "hold (release) the msg_id `ID`; repeat it for more", func(v string) error {
		o.r.MsgIDs = append(o.r.MsgIDs, v)
		return nil
	})
	o.cf = addContractFlags(fs)
	o.db = addDBFlag(fs)
}

func (o *holdArgs) Validate(e *env, pos []string) error {
	if err := e.Positionals(pos, 1, -1, "DIR"); err != nil {
		return err
	}
	o.dir, o.r.Files = pos[0], pos[1:]
	if len(o.r.Files) == 0 && len(o.r.MsgIDs) == 0 {
		return e.Usage("name a FILE or a --msg-id ID")
	}
	for _, f := range o.r.Files {
		if err := queue.CheckName(f); err != nil {
			return e.Usage("%v: FILE is a file's name in the stage, not a path", err)
		}
	}
	if o.note != nil {
		o.r.Note = *o.note
	}
	return nil
}

// holdOpts are spool hold's.
type holdOpts struct{ holdArgs }

func (o *holdOpts) Flags(fs *flag.FlagSet) {
	o.note = fs.String("note", "", "why they are held (`TEXT`)")
	o.holdArgs.Flags(fs)
}

func (o *holdOpts) Run(ctx context.Context, e *env) (err error) {
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
			fmt.Fprintf(e.Stdout, "held %s as held/%s\n", cell(it.File), cell(it.Name))
		case it.MsgID != "" && (it.Done || it.Why == hold.HeldAlready):
			line := "msg_id " + cell(it.MsgID) + " held"
			if !it.Done {
				line += " already"
			}
			if it.Processed != nil {
				line += fmt.Sprintf(" (processed already at %s: its later deliveries are held)", it.Processed.Format(time.RFC3339))
			}
			fmt.Fprintln(e.Stdout, line)
		default:
			e.Warn("%s: %s", cell(it.File), it.Why)
		}
	}
	if res.Unmet() > 0 {
		return errCheckFailed
	}
	return nil
}

// releaseOpts are spool release's.
type releaseOpts struct{ holdArgs }

func (o *releaseOpts) Run(ctx context.Context, e *env) (err error) {
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
				fmt.Fprintf(e.Stdout, "msg_id %s released\n", cell(it.MsgID))
			} else {
				e.Warn("msg_id %s: %s", cell(it.MsgID), it.Why)
			}
			for _, f := range it.Released {
				if f.Done {
					fmt.Fprintf(e.Stdout, "released held/%s as inbox/%s\n", cell(f.File), cell(f.Name))
				}
			}
		case it.Done:
			fmt.Fprintf(e.Stdout, "released %s as inbox/%s\n", cell(it.File), cell(it.Name))
		default:
			e.Warn("%s: %s", cell(it.File), it.Why)
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

func (o *holdsOpts) Flags(fs *flag.FlagSet) {
	o.asJSON = fs.Bool("json", false, "one JSON object (see above)")
	o.cf = addContractFlags(fs)
	o.dirOpts.Flags(fs)
}

func (o *holdsOpts) Run(ctx context.Context, e *env) (err error) {
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
		return output(e, "", st.WriteJSON)
	}
	return output(e, "", st.WriteText)
}

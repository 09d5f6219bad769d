package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool/hold"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/report"
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
}

func init() {
	holdCommand.run = runHold
	releaseCommand.run = runRelease
	holdsCommand.run = runHolds
}

// holdArgs parses DIR [FILE...] --msg-id ... for hold and release.
func holdArgs(e *env, args []string, withNote bool) (dir, db string, cf *contractFlags, r hold.Request, err error) {
	flags := e.flagSet()
	flags.Func("msg-id", "hold (release) the msg_id `ID`; repeat it for more", func(v string) error {
		r.MsgIDs = append(r.MsgIDs, v)
		return nil
	})
	var note *string
	if withNote {
		note = flags.String("note", "", "why they are held (`TEXT`)")
	}
	cf = addContractFlags(flags)
	dbf := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return "", "", nil, r, err
	}
	if err := e.positionals(pos, 1, -1, "DIR"); err != nil {
		return "", "", nil, r, err
	}
	r.Files = pos[1:]
	if len(r.Files) == 0 && len(r.MsgIDs) == 0 {
		return "", "", nil, r, e.usage("name a FILE or a --msg-id ID")
	}
	for _, f := range r.Files {
		if err := queue.CheckName(f); err != nil {
			return "", "", nil, r, e.usage("%v: FILE is a file's name in the stage, not a path", err)
		}
	}
	if note != nil {
		r.Note = *note
	}
	return pos[0], *dbf, cf, r, nil
}

func runHold(ctx context.Context, e *env, args []string) (err error) {
	dir, db, cf, r, err := holdArgs(e, args, true)
	if err != nil {
		return err
	}
	s, done, err := holdService(ctx, dir, db, cf)
	if err != nil {
		return err
	}
	defer done(&err)
	res, err := s.Hold(ctx, currentOperator().identity(), r)
	if err != nil {
		return err
	}
	for _, it := range res.Items {
		switch {
		case it.File != "" && it.Done:
			fmt.Fprintf(e.stdout, "held %s as held/%s\n", cell(it.File), cell(it.Name))
		case it.MsgID != "" && (it.Done || it.Why == "held already"):
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
	// A msg_id held already is held as asked; anything else not done is
	// a finding.
	if res.Missing > countHeldAlready(res.Items) {
		return errCheckFailed
	}
	return nil
}

// countHeldAlready counts the msg_ids a hold found held already: not
// done, but what was asked for holds.
func countHeldAlready(items []hold.Item) int {
	n := 0
	for _, it := range items {
		if it.MsgID != "" && !it.Done && it.Why == "held already" {
			n++
		}
	}
	return n
}

func runRelease(ctx context.Context, e *env, args []string) (err error) {
	dir, db, cf, r, err := holdArgs(e, args, false)
	if err != nil {
		return err
	}
	s, done, err := holdService(ctx, dir, db, cf)
	if err != nil {
		return err
	}
	defer done(&err)
	res, err := s.Release(ctx, currentOperator().identity(), r)
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

func runHolds(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	asJSON := flags.Bool("json", false, "one JSON object (see above)")
	cf := addContractFlags(flags)
	db := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := e.positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	c, err := cf.contract(pos[0])
	if err != nil {
		return err
	}
	d, l, done, err := openBound(ctx, pos[0], *db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	st, err := (&hold.Service{Dir: d, Ledger: l, Contract: c}).State(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return e.output("", func(w io.Writer) error { return report.WriteJSON(w, holdsJSONOf(st)) })
	}
	return e.output("", func(w io.Writer) error { return writeHolds(w, st) })
}

// holdsJSON is spool holds --json; its field names are stable.
type holdsJSON struct {
	Paused *holderJSON    `json:"paused"`
	MsgIDs []heldIDJSON   `json:"msg_ids"`
	Files  []heldFileJSON `json:"files"`
	Stale  []heldFileJSON `json:"stale_records"`
}

type holderJSON struct {
	By   string    `json:"by"`
	Role string    `json:"role"`
	Via  string    `json:"via"`
	Note string    `json:"note"`
	At   time.Time `json:"at"`
}

func holderOf(h ledger.Holder) holderJSON {
	return holderJSON{By: h.By, Role: h.Role, Via: h.Via, Note: h.Note, At: h.At.UTC()}
}

type heldIDJSON struct {
	MsgID string `json:"msg_id"`
	holderJSON
}

type heldFileJSON struct {
	File   string  `json:"file"`
	Origin *string `json:"origin"`
	MsgID  *string `json:"msg_id"`
	Cause  *string `json:"cause"`
	*holderJSON
	Size     int64 `json:"size"`
	Recorded bool  `json:"recorded"`
}

func optionalText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// holdsJSONOf is st as spool holds --json prints it.
func holdsJSONOf(st hold.State) holdsJSON {
	out := holdsJSON{MsgIDs: []heldIDJSON{}, Files: []heldFileJSON{}, Stale: []heldFileJSON{}}
	if st.Pause.Paused {
		h := holderOf(st.Pause.Holder)
		out.Paused = &h
	}
	for _, id := range st.MsgIDs {
		out.MsgIDs = append(out.MsgIDs, heldIDJSON{MsgID: id.MsgID, holderJSON: holderOf(id.Holder)})
	}
	for _, f := range st.Files {
		j := heldFileJSON{File: f.Name, MsgID: optionalText(f.MsgID), Size: f.Size, Recorded: f.Record != nil}
		if r := f.Record; r != nil {
			h := holderOf(r.Holder)
			j.Origin, j.Cause, j.holderJSON = optionalText(r.Origin), optionalText(r.Cause), &h
		}
		out.Files = append(out.Files, j)
	}
	for _, r := range st.Stale {
		h := holderOf(r.Holder)
		out.Stale = append(out.Stale, heldFileJSON{File: r.File, Origin: optionalText(r.Origin), MsgID: optionalText(r.MsgID),
			Cause: optionalText(r.Cause), holderJSON: &h, Recorded: true})
	}
	return out
}

// writeHolds prints st for people.
func writeHolds(w io.Writer, st hold.State) error {
	if p := st.Pause; p.Paused {
		fmt.Fprintf(w, "paused %s\n", pausedBy(p))
	} else {
		fmt.Fprintln(w, "not paused")
	}
	fmt.Fprintf(w, "msg_ids held: %d\n", len(st.MsgIDs))
	for _, id := range st.MsgIDs {
		fmt.Fprintf(w, "  %s  by %s, %s%s\n", cell(id.MsgID), cell(id.By), id.At.UTC().Format(time.RFC3339), noteText(id.Note))
	}
	fmt.Fprintf(w, "files in held/: %d\n", len(st.Files))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(st.Files) > 0 {
		fmt.Fprintln(tw, "  FILE\tWAS\tMSG_ID\tHELD BY\tAT\tWHY")
	}
	for _, f := range st.Files {
		if r := f.Record; r != nil {
			why := r.Note
			if r.Cause == ledger.HeldByMsgID {
				why = strings.TrimSpace("its msg_id is held " + r.Note)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", cell(f.Name), cell(r.Origin), cell(dash(f.MsgID)), cell(r.By),
				r.At.UTC().Format(time.RFC3339), cell(dash(why)))
			continue
		}
		fmt.Fprintf(tw, "  %s\t-\t%s\t-\t-\tno record (a hold killed half-way, or moved here by hand): held all the same\n", cell(f.Name), cell(dash(f.MsgID)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Stale) > 0 {
		fmt.Fprintf(w, "records without their file in held/: %d (removed by hand; spool fsck --repair forgets them)\n", len(st.Stale))
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func noteText(n string) string {
	if n == "" {
		return ""
	}
	return ": " + cell(n)
}

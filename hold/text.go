package hold

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/report"
)

// HeldAlready is an Item's Why for a msg_id a Hold found held already:
// not done, but held as asked.
const HeldAlready = "held already"

// Unmet counts the items of a Hold that are not held as asked: those not
// done, but for the msg_ids held already (HeldAlready).
func (r Result) Unmet() int {
	n := r.Missing
	for _, it := range r.Items {
		if it.MsgID != "" && !it.Done && it.Why == HeldAlready {
			n--
		}
	}
	return n
}

// PausedBy says who paused the queue, when, and why, in one line of
// text: "by NAME since TIME: NOTE".
func PausedBy(p ledger.PauseState) string {
	s := fmt.Sprintf("by %s since %s", report.Terminal(p.By), p.At.UTC().Format(time.RFC3339))
	if p.Note != "" {
		s += ": " + report.Terminal(p.Note)
	}
	return s
}

// WriteText writes st for people (spool holds): the pause, the msg_ids
// held, and a table of the files in held/, each with the name it had in
// inbox/, its msg_id, who held it, when and why; a file without a record
// is listed as held all the same, and the stale records are counted.
func (st State) WriteText(w io.Writer) error {
	cell := report.Terminal
	if p := st.Pause; p.Paused {
		fmt.Fprintf(w, "paused %s\n", PausedBy(p))
	} else {
		fmt.Fprintln(w, "not paused")
	}
	fmt.Fprintf(w, "msg_ids held: %d\n", len(st.MsgIDs))
	for _, id := range st.MsgIDs {
		note := ""
		if id.Note != "" {
			note = ": " + cell(id.Note)
		}
		fmt.Fprintf(w, "  %s  by %s, %s%s\n", cell(id.MsgID), cell(id.By), id.At.UTC().Format(time.RFC3339), note)
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

// WriteJSON writes st as one JSON object (spool holds --json), whose field
// names are stable: paused (null, or {by, role, via, note, at}), msg_ids
// [{msg_id, by, role, via, note, at}], files [{file, origin, msg_id,
// cause, by, role, via, note, at, size, recorded}] and stale_records.
func (st State) WriteJSON(w io.Writer) error {
	out := stateJSON{MsgIDs: []heldIDJSON{}, Files: []heldFileJSON{}, Stale: []heldFileJSON{}}
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
	return report.WriteJSON(w, out)
}

// stateJSON is State as WriteJSON writes it.
type stateJSON struct {
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

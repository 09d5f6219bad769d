package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spoolq/spool/ledger"
)

// AuditEntry is one row of the audit as the reports show it: the row, and
// whether its process is known to be gone, which makes a row still
// started one that was interrupted.
type AuditEntry struct {
	ledger.AuditRow
	// Gone: the row has no outcome yet and the process that wrote it is
	// gone from its host (checked by the caller, on the host that runs
	// the report).
	Gone bool
}

// Shown is the outcome the reports show: the recorded one, or for a row
// still started, "interrupted" when its process is gone, else "started".
func (a AuditEntry) Shown() string {
	if a.Outcome == ledger.AuditStarted && a.Gone {
		return ledger.AuditInterrupted
	}
	return a.Outcome
}

// AuditJSON is one object of WriteAuditJSON's array; its keys are stable.
type AuditJSON struct {
	ID int64 `json:"id"`
	// At is when the action began; EndedAt when its outcome was recorded
	// (null while none is), both RFC 3339 UTC with microseconds.
	At      string  `json:"at"`
	EndedAt *string `json:"ended_at"`
	// DurationS is EndedAt - At in seconds; null while no outcome is
	// recorded.
	DurationS *float64 `json:"duration_s"`
	Actor     string   `json:"actor"`
	Role      string   `json:"role"`
	Via       string   `json:"via"`
	Action    string   `json:"action"`
	// Selection is what was asked, the JSON object the action recorded.
	Selection json.RawMessage `json:"selection"`
	// Counts are the action's counts by name ({} while started).
	Counts ledger.AuditCounts `json:"counts"`
	// Outcome is what the ledger holds: started, ok, failed,
	// interrupted, refused. Shown is the report's reading of it (see
	// AuditEntry.Shown): "interrupted" for a row still started whose
	// process is gone.
	Outcome string `json:"outcome"`
	Shown   string `json:"shown"`
	// Recorded is false while the row has no outcome (started).
	Recorded bool   `json:"recorded"`
	Detail   string `json:"detail"`
	Host     string `json:"host"`
	PID      int    `json:"pid"`
	// Task is the durable task the row is about; null when none.
	Task *int64 `json:"task"`
}

// AuditRowJSON is a's object in WriteAuditJSON.
func AuditRowJSON(a AuditEntry) AuditJSON {
	j := AuditJSON{
		ID: a.ID, At: a.At.UTC().Format(ledger.TimeLayout), EndedAt: jsonTime(a.Ended),
		Actor: a.Actor, Role: a.Role, Via: a.Via, Action: a.Action, Selection: json.RawMessage(a.Selection),
		Counts: a.Counts, Outcome: a.Outcome, Shown: a.Shown(), Recorded: a.Outcome != ledger.AuditStarted,
		Detail: a.Detail, Host: a.Host, PID: a.PID,
	}
	if !json.Valid(j.Selection) {
		// Written by something else than package ledger: carried as a
		// string rather than breaking the array.
		s, _ := json.Marshal(a.Selection) // a string always marshals
		j.Selection = s
	}
	if j.Counts == nil {
		j.Counts = ledger.AuditCounts{}
	}
	if !a.Ended.IsZero() {
		d := a.Ended.Sub(a.At).Seconds()
		j.DurationS = &d
	}
	if a.Task != 0 {
		t := a.Task
		j.Task = &t
	}
	return j
}

// WriteAuditJSON writes rows, oldest first, as one JSON array of
// AuditJSON objects; [] when there are none.
func WriteAuditJSON(w io.Writer, rows []AuditEntry) error {
	out := make([]AuditJSON, 0, len(rows))
	for _, a := range rows {
		out = append(out, AuditRowJSON(a))
	}
	return WriteJSON(w, out)
}

// WriteAuditTable writes rows, oldest first, as a table with the header
// ID AT ACTOR VIA ACTION OUTCOME SECS COUNTS SELECTION DETAIL; every text
// a producer or an operator chose goes through Terminal. A row still
// started reads "started (no outcome yet)", or "interrupted (no outcome:
// process gone)" when its process is gone.
func WriteAuditTable(w io.Writer, rows []AuditEntry) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAT\tACTOR\tVIA\tACTION\tOUTCOME\tSECS\tCOUNTS\tSELECTION\tDETAIL")
	for _, a := range rows {
		actor := a.Actor
		if a.Role != "" {
			actor += " (" + a.Role + ")"
		}
		outcome := a.Shown()
		switch {
		case a.Outcome == ledger.AuditStarted && a.Gone:
			outcome += " (no outcome: process gone)"
		case a.Outcome == ledger.AuditStarted:
			outcome += " (no outcome yet)"
		}
		secs := "-"
		if !a.Ended.IsZero() {
			secs = fmt.Sprintf("%.3f", a.Ended.Sub(a.At).Seconds())
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, tableTime(a.At), cell(actor), cell(a.Via), cell(a.Action),
			outcome, secs, dash(countsText(a.Counts)), dash(cell(selectionText(a.Selection))), dash(cell(oneLine(a.Detail))))
	}
	return tw.Flush()
}

// countsText is counts as name=N, in name order.
func countsText(c ledger.AuditCounts) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, c[k])
	}
	return strings.Join(parts, " ")
}

// selectionText is the selection's JSON on one line, "" for {}.
func selectionText(s string) string {
	if s == "{}" || s == "" {
		return ""
	}
	return oneLine(s)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

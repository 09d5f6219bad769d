package report

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool/ledger"
)

// The rich views of the dead letters in error/: a table for people, JSON
// for tools, and the per-reason triage counts. The plain `file,reason` CSV
// of WriteErrorsCSV stays the contract scripts rely on.

// maxTableDetail bounds the detail shown in the table, which must stay
// readable on a terminal; the JSON carries it whole.
const maxTableDetail = 100

// WriteErrorsLong writes rows as an aligned table for people, one line a
// dead letter: FILE, REASON, ATTEMPTS, FIRST FAILURE, LAST FAILURE,
// CONSUMER (host:pid), ORIGINAL (the name it was claimed under, "-" when
// the same as FILE), REPLAYS and PREVIOUS (how often it was replayed and
// failed before), then DETAIL, last because it is the widest, prefixed by
// the field when the record names one. Times are UTC to the second; "-"
// marks what is unknown.
func WriteErrorsLong(w io.Writer, rows []ErrorRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tREASON\tATTEMPTS\tFIRST FAILURE\tLAST FAILURE\tCONSUMER\tORIGINAL\tREPLAYS\tPREVIOUS\tDETAIL")
	for _, r := range rows {
		attempts, consumer, original := "-", "-", "-"
		if r.Attempts > 0 {
			attempts = strconv.Itoa(r.Attempts)
		}
		if host, pid, ok := ParseConsumer(r.Consumer); ok {
			consumer = host + ":" + strconv.Itoa(pid)
		} else if r.Consumer != "" {
			consumer = r.Consumer
		}
		if r.OriginalFile != "" && r.OriginalFile != r.File {
			original = r.OriginalFile
		}
		detail := Terminal(oneLine(r.Detail))
		if r.Field != "" {
			detail = r.Field + ": " + detail
		}
		if len(detail) > maxTableDetail {
			detail = clip(detail, maxTableDetail) + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n",
			cell(r.File), r.Reason, attempts, tableTime(r.FirstFailure), tableTime(r.LastFailure),
			cell(consumer), cell(original), len(r.Replays), len(r.Previous), detail)
	}
	return tw.Flush()
}

// cell keeps a name from breaking the table: tabs and line breaks, which a
// file name may hold, are shown Go-quoted.
func cell(s string) string { return Terminal(s) }

// clip cuts s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

func tableTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05Z")
}

// jsonTime is a time in the ledger's layout (RFC 3339, UTC, microseconds),
// or null when zero.
func jsonTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(ledger.TimeLayout)
	return &s
}

func jsonString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ErrorJSON is one object of WriteErrorsJSON's array. Its keys are stable;
// keys are added, never renamed or removed.
type ErrorJSON struct {
	// File is the name in error/; FileB64 its bytes in base64 when it is
	// not valid UTF-8 (File then has U+FFFD for the bad bytes), else
	// absent.
	File    string  `json:"file"`
	FileB64 *string `json:"file_b64,omitempty"`
	// OriginalFile is the name it was claimed under in inbox/; null when
	// unknown.
	OriginalFile    *string `json:"original_file"`
	OriginalFileB64 *string `json:"original_file_b64,omitempty"`
	// Reason is the dead-letter reason, or "unknown" without a record.
	Reason string `json:"reason"`
	// Field is the offending field; null when none.
	Field *string `json:"field"`
	// Detail is the whole recorded explanation.
	Detail string `json:"detail"`
	// MsgID is the message's key when the ledger knows it; null otherwise.
	MsgID *string `json:"msg_id"`
	// Attempts: see ErrorRow.Attempts.
	Attempts int `json:"attempts"`
	// FirstFailure, LastFailure and At are RFC 3339 UTC times with
	// microseconds, or null when unknown.
	FirstFailure *string `json:"first_failure"`
	LastFailure  *string `json:"last_failure"`
	At           *string `json:"at"`
	// Consumer is the recorded identity; ConsumerHost and ConsumerPID are
	// parsed from it (null when it has another shape).
	Consumer     *string `json:"consumer"`
	ConsumerHost *string `json:"consumer_host"`
	ConsumerPID  *int    `json:"consumer_pid"`
	// Ino is the file's inode number.
	Ino uint64 `json:"ino"`
	// Replays counts the replays of this message; PreviousFailures the dead
	// letters it was before the last replay.
	Replays          int `json:"replays"`
	PreviousFailures int `json:"previous_failures"`
	// History is the message's past, oldest first: every earlier dead
	// letter, each followed by the replay that took it out of error/, so it
	// ends with the replay that preceded the current failure. Empty for a
	// first failure.
	History []HistoryJSON `json:"history"`
}

// HistoryJSON is one event of ErrorJSON.History. Event is "dead-letter"
// (with reason, field, detail, attempts) or "replay" (with new_name, by,
// note); the other kind's keys are omitted.
type HistoryJSON struct {
	Event string `json:"event"`
	At    string `json:"at"`
	// File is the name the message had: in inbox/ when it was claimed (a
	// dead letter), in error/ when it was replayed.
	File     string `json:"file"`
	Reason   string `json:"reason,omitempty"`
	Field    string `json:"field,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
	NewName  string `json:"new_name,omitempty"`
	By       string `json:"by,omitempty"`
	Note     string `json:"note,omitempty"`
}

// ErrorsJSON converts rows to the objects WriteErrorsJSON writes.
func ErrorsJSON(rows []ErrorRow) []ErrorJSON {
	out := make([]ErrorJSON, 0, len(rows))
	for _, r := range rows {
		j := ErrorJSON{
			File: r.File, FileB64: B64(r.File), OriginalFile: jsonString(r.OriginalFile), OriginalFileB64: B64(r.OriginalFile), Reason: r.Reason,
			Field: jsonString(r.Field), Detail: r.Detail, MsgID: jsonString(r.MsgID),
			Attempts: r.Attempts, FirstFailure: jsonTime(r.FirstFailure), LastFailure: jsonTime(r.LastFailure),
			At: jsonTime(r.At), Consumer: jsonString(r.Consumer), Ino: r.Ino,
			Replays: len(r.Replays), PreviousFailures: len(r.Previous), History: []HistoryJSON{},
		}
		if host, pid, ok := ParseConsumer(r.Consumer); ok {
			j.ConsumerHost, j.ConsumerPID = &host, &pid
		}
		// The chain alternates, oldest first: [replay of a file without a
		// record,] dead letter, its replay, dead letter, its replay, ...
		// (see lineage). Built from that structure rather than sorted by
		// time, because consumers' and operators' clocks may disagree.
		replay := func(p ledger.ReplayRecord) HistoryJSON {
			return HistoryJSON{Event: "replay", At: *jsonTime(p.At), File: p.File, NewName: p.NewName, By: p.By, Note: p.Note}
		}
		offset := len(r.Replays) - len(r.Previous)
		if offset == 1 {
			j.History = append(j.History, replay(r.Replays[0]))
		}
		for k, p := range r.Previous {
			attempts := p.Attempts
			if attempts == 0 {
				attempts = 1
			}
			j.History = append(j.History, HistoryJSON{Event: "dead-letter", At: *jsonTime(p.At), File: p.File,
				Reason: string(p.Reason), Field: p.Field, Detail: p.Detail, Attempts: attempts})
			if i := k + offset; i >= 0 && i < len(r.Replays) {
				j.History = append(j.History, replay(r.Replays[i]))
			}
		}
		out = append(out, j)
	}
	return out
}

// WriteErrorsJSON writes rows as one JSON array of ErrorJSON objects,
// indented, ending with a newline; an empty error/ is [].
func WriteErrorsJSON(w io.Writer, rows []ErrorRow) error {
	return WriteJSON(w, ErrorsJSON(rows))
}

// WriteJSON writes v as indented JSON ending with a newline, with &, < and
// > left as they are: the one JSON style of spool's reports.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// ReasonGroup counts the dead letters in error/ that share a reason.
type ReasonGroup struct {
	Reason string
	Count  int
	// First and Last are the earliest first failure and the latest last
	// failure among them; zero when none is known (reason unknown).
	First, Last time.Time
}

// GroupByReason counts rows per reason, most frequent first, then by
// reason in byte order: the triage view of what fills error/.
func GroupByReason(rows []ErrorRow) []ReasonGroup {
	idx := map[string]int{}
	var groups []ReasonGroup
	for _, r := range rows {
		i, ok := idx[r.Reason]
		if !ok {
			i = len(groups)
			idx[r.Reason] = i
			groups = append(groups, ReasonGroup{Reason: r.Reason})
		}
		g := &groups[i]
		g.Count++
		if !r.FirstFailure.IsZero() && (g.First.IsZero() || r.FirstFailure.Before(g.First)) {
			g.First = r.FirstFailure
		}
		if r.LastFailure.After(g.Last) {
			g.Last = r.LastFailure
		}
	}
	slices.SortFunc(groups, func(a, b ReasonGroup) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Reason, b.Reason))
	})
	return groups
}

// WriteReasonGroupsCSV writes groups as CSV with the header
// reason,count,first,last; the times are RFC 3339 UTC with microseconds,
// empty when unknown.
func WriteReasonGroupsCSV(w io.Writer, groups []ReasonGroup) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"reason", "count", "first", "last"}); err != nil {
		return err
	}
	for _, g := range groups {
		rec := []string{g.Reason, strconv.Itoa(g.Count), csvTime(g.First), csvTime(g.Last)}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func csvTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(ledger.TimeLayout)
}

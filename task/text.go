package task

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool/report"
)

// The text forms of tasks, as spool tasks, approve, replay and discard
// print them. Every value that came from outside (a name, a note, a
// reason) goes through report.Terminal: none can move a terminal's cursor.

// WriteList writes tasks as a table, one line each, newest as given:
// id, kind, state, the counts, who asked and approved, when, what was
// asked (Request.What) and the note.
func WriteList(w io.Writer, ts []Task) error {
	cell := report.Terminal
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATE\tFILES\tBEGUN\tDONE\tGONE\tCHANGED\tBY\tAPPROVED BY\tASKED\tWHAT\tNOTE")
	for _, t := range ts {
		approved := t.ApprovedBy
		if approved == "" {
			approved = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, t.State, t.Files, t.Next, t.Done,
			t.Missing, t.Changed, cell(t.By), cell(approved), t.Created.UTC().Format(time.RFC3339), cell(t.Request.What()), cell(t.Request.Note))
	}
	return tw.Flush()
}

// What says in one line what r asked, as the command line would ask it:
// its selection, its filters and the options given ("reason
// parse-error --since 2025-01-01T00:00:00Z --force").
func (r Request) What() string {
	s := r.Selection
	var parts []string
	switch {
	case len(s.Names) == 1:
		parts = append(parts, s.Names[0])
	case len(s.Names) > 1:
		parts = append(parts, fmt.Sprintf("%d names", len(s.Names)))
	case s.Reason != "":
		parts = append(parts, "reason "+s.Reason)
	case s.All:
		parts = append(parts, "all")
	}
	for _, f := range []struct{ name, val string }{{"since", timeText(s.Since)}, {"until", timeText(s.Until)},
		{"detail-match", s.DetailMatch}, {"msg-id", s.MsgID}, {"order-no", s.OrderNo}, {"to", r.To}} {
		if f.val != "" {
			parts = append(parts, fmt.Sprintf("--%s %s", f.name, f.val))
		}
	}
	if r.Force {
		parts = append(parts, "--force")
	}
	if r.Rate > 0 {
		parts = append(parts, fmt.Sprintf("--rate %g", r.Rate))
	}
	return strings.Join(parts, " ")
}

// timeText is t in RFC 3339 UTC, "" for none.
func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// HashText is a body's hash as printed: the hex SHA-256, or why there is
// none.
func HashText(h string) string {
	if h == "" {
		return "none: not a regular file, or not readable"
	}
	return h
}

// WriteView writes task v as an approver sees it: what it does, to which
// files, asked by whom and why. dir is the queue as the reader named it,
// for the command that lists the files left out.
func WriteView(w io.Writer, dir string, v View) {
	cell := report.Terminal
	t := v.Task
	fmt.Fprintf(w, "task %d: %s of %d files, %s\n", t.ID, t.Kind, t.Files, t.State)
	asked := cell(t.By)
	if t.Role != "" {
		asked += " (" + t.Role + ")"
	}
	fmt.Fprintf(w, "  asked by   %s via %s, %s\n", asked, t.Via, timeText(t.Created))
	why := t.Request.Note
	if why == "" {
		why = "-"
	}
	fmt.Fprintf(w, "  why        %s\n", cell(why))
	fmt.Fprintf(w, "  selection  %s\n", cell(Request{Selection: t.Request.Selection}.What()))
	if t.Kind == Discard {
		to := "none: the files are deleted"
		if t.Request.To != "" {
			to = cell(t.Request.To) + " (moved there with their own modes; the directory is closed to other users)"
		}
		fmt.Fprintf(w, "  to         %s\n", to)
	} else {
		force := "no"
		if t.Request.Force {
			force = "yes: dead letters whose msg_id is processed already are replayed too"
		}
		fmt.Fprintf(w, "  force      %s (%d selected left out: processed already)\n", force, t.Skipped)
	}
	rate := "no limit: the set moves as one chunk, all or nothing"
	if t.Request.Rate > 0 {
		rate = fmt.Sprintf("%g files a second, in chunks a cancel can stop between", t.Request.Rate)
	}
	fmt.Fprintf(w, "  rate       %s\n", rate)
	fmt.Fprintf(w, "  digest     sha256 %s\n", t.Digest)
	if t.ApprovedBy != "" {
		fmt.Fprintf(w, "  approved   by %s, %s\n", cell(t.ApprovedBy), timeText(t.Approved))
	}
	if t.State != StateWaiting && t.State != StateApproved {
		fmt.Fprintf(w, "  progress   %d begun, %d done, %d gone before, %d changed since the request\n", t.Next, t.Done, t.Missing, t.Changed)
	}
	if t.Detail != "" {
		fmt.Fprintf(w, "  detail     %s\n", cell(t.Detail))
	}
	fmt.Fprintf(w, "  files      %d:\n", t.Files)
	for _, f := range v.FileList.Items {
		var about []string
		for _, a := range []struct{ k, v string }{{"reason", f.Reason}, {"msg_id", f.MsgID}} {
			if a.v != "" {
				about = append(about, a.k+" "+cell(a.v))
			}
		}
		about = append(about, "sha256 "+HashText(f.SHA256), fmt.Sprintf("%d bytes", f.Size))
		if f.Changed != "" {
			about = append(about, "changed: "+f.Changed)
		}
		fmt.Fprintf(w, "    %s (%s)\n", cell(f.File), strings.Join(about, ", "))
	}
	if more := t.Files - len(v.FileList.Items); more > 0 {
		fmt.Fprintf(w, "    and %d more (spool tasks %s %d --files 0 lists them all)\n", more, dir, t.ID)
	}
}

// WritePreview writes the files p selected for req, each with what is
// (on a dry run: would be) done, in the selection's order: the skipped
// ones always (a replay's "skip NAME: msg_id X already processed"), the
// others when dry. A selection of nothing writes nothing and returns the
// one warning that says so; otherwise it returns "".
func WritePreview(w io.Writer, req Request, p Preview, dry bool) (warning string) {
	cell := report.Terminal
	for _, pe := range p.Pending {
		fmt.Fprintf(w, "skip %s\n", cell(pe.Error()))
	}
	if p.Count == 0 && p.Skipped == 0 && len(p.Pending) > 0 {
		return fmt.Sprintf("the dead letters selected are not recorded yet: nothing to %s", req.Kind)
	}
	if p.Count == 0 && p.Skipped == 0 {
		sel := req.Selection
		switch {
		case sel.All && !sel.Filtered():
			return fmt.Sprintf("error/ holds no dead letter: nothing to %s", req.Kind)
		case sel.Reason != "" && !sel.Filtered():
			return fmt.Sprintf("no dead letter in error/ has reason %q: nothing to %s", sel.Reason, req.Kind)
		}
		return fmt.Sprintf("no dead letter in error/ matches: nothing to %s", req.Kind)
	}
	skips := p.Skips
	for i := 0; i <= len(p.Files); i++ {
		for len(skips) > 0 && skips[0].At == i {
			fmt.Fprintf(w, "skip %s: msg_id %s already processed\n", cell(skips[0].File), cell(skips[0].MsgID))
			skips = skips[1:]
		}
		if !dry || i == len(p.Files) {
			continue
		}
		f := p.Files[i]
		if req.Kind == Replay {
			fmt.Fprintf(w, "would replay %s\n", cell(f.File))
			continue
		}
		where := ""
		if req.To != "" {
			where = ", to " + cell(req.To)
		}
		fmt.Fprintf(w, "would discard %s (reason %s, sha256 %s%s)\n", cell(f.File), cell(f.Reason), HashText(f.ContentHash), where)
	}
	return ""
}

// WriteEnd writes how task t ended: its state and its counts.
func WriteEnd(w io.Writer, t Task) {
	past := "replayed"
	if t.Kind == Discard {
		past = "discarded"
	}
	fmt.Fprintf(w, "task %d %s: %d of %d files %s, %d gone before, %d changed since the request\n",
		t.ID, t.State, t.Done, t.Files, past, t.Missing, t.Changed)
}

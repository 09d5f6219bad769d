package report

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// StatusReport is the state of a queue and its ledger, for `spool status`.
type StatusReport struct {
	// Path is the queue directory.
	Path string
	// Messages per stage; Processing counts claims in flight.
	Inbox, Processing, Done, Error int
	// Oldest is the modification time of the oldest message waiting in
	// inbox/; zero when inbox/ is empty.
	Oldest time.Time
	// WaitingForDoneFile counts the data files of inbox/ that wait for
	// their done-file (a queue of batch files with done_file), not in
	// Inbox; WaitingOldest is the earliest modification time among them.
	WaitingForDoneFile int
	WaitingOldest      time.Time
	// OrphanDoneFiles counts the done-files of inbox/ whose data file is
	// not there.
	OrphanDoneFiles int
	// NotTaken counts the entries of inbox/ the queue never takes (not a
	// name it includes), NotTakenNames the first few.
	NotTaken      int
	NotTakenNames []string
	// NamesRule says which names of inbox/ the queue takes
	// (queue.Dir.MessageNamesRule), for the line on those it does not;
	// NamesHint, when only case keeps one of them from being taken
	// (queue.Dir.NotTakenHint).
	NamesRule, NamesHint string
	// Now is when the report was taken; ages are relative to it.
	Now time.Time
	// Ledger counts processed rows, duplicates and dead letters by reason.
	Ledger ledger.Stats
	// Temps counts the temp files in the queue (queue.Dir.Temps), and
	// StaleTemps those whose writer is gone: spool fsck --repair, enqueue
	// and consume remove them.
	Temps, StaleTemps int
	// ReplayLog.Unfinished counts replays killed before they finished.
	UnfinishedReplays int
	// Discards counts the dead letters discarded on purpose (spool
	// discard) and the discards killed before they finished.
	Discards ledger.DiscardStats
	// Retries counts the messages waiting for a retry, and NextRetry is
	// when the soonest is due (zero when none waits).
	Retries   int
	NextRetry time.Time
	// Outbox counts the outbox's rows (NoOutbox: the ledger's schema has
	// no outbox yet), and Parked lists the first parked rows, with their
	// reasons.
	Outbox   ledger.OutboxStats
	NoOutbox bool
	Parked   []ledger.ParkedRow
	// Pause is the queue's pause (spool pause); Held counts the messages
	// in held/ and Holding.HeldIDs the msg_ids held (spool hold).
	Pause   ledger.PauseState
	Held    int
	HeldIDs int
	// BatchFiles are the batch files whose records were committed last
	// (at most maxBatchFilesShown), with what became of their records.
	BatchFiles []ledger.BatchFile
}

// maxParkedShown bounds the parked rows a status lists.
const maxParkedShown = 10

// maxBatchFilesShown bounds the batch files a status lists.
const maxBatchFilesShown = 10

// OldestAge is how long the oldest message has waited in inbox/, and false
// when inbox/ is empty.
func (r StatusReport) OldestAge() (time.Duration, bool) {
	if r.Oldest.IsZero() {
		return 0, false
	}
	return max(r.Now.Sub(r.Oldest), 0), true
}

// Status takes a StatusReport of d and l. Unlike `spool lag` it stats every
// message in inbox/ to find the oldest, so it costs one lstat per waiting
// message. It reads every stage in chunks: its memory does not grow with
// the files of done/ or error/.
func Status(ctx context.Context, d *queue.Dir, l *ledger.DB) (StatusReport, error) {
	r := StatusReport{Path: d.Path(), Now: time.Now()}
	for _, c := range []struct {
		s queue.Stage
		n *int
	}{{queue.Inbox, &r.Inbox}, {queue.Processing, &r.Processing}, {queue.Done, &r.Done}, {queue.Error, &r.Error}, {queue.Held, &r.Held}} {
		// Counted from the directory's entries in chunks (queue.Dir.Stats):
		// a million files in done/ cost no memory per file.
		st, err := d.Stats(c.s, false)
		if err != nil {
			return r, fmt.Errorf("status: %w", err)
		}
		*c.n = st.Messages
		if c.s == queue.Inbox {
			r.WaitingForDoneFile, r.WaitingOldest, r.OrphanDoneFiles = st.Waiting, st.WaitingOldest, st.OrphanDoneFiles
			r.NotTaken, r.NotTakenNames, r.NamesRule = st.NotTaken, st.NotTakenNames, d.MessageNamesRule()
			r.NamesHint = d.NotTakenHint(st.NotTakenNames)
		}
	}
	oldest, err := OldestInbox(ctx, d)
	if err != nil {
		return r, fmt.Errorf("status: %w", err)
	}
	r.Oldest = oldest
	st, err := l.Messages().Stats(ctx)
	if err != nil {
		return r, fmt.Errorf("status: %w", err)
	}
	r.Ledger = st
	if r.Pause, err = l.Holding().PauseState(ctx); err != nil {
		return r, fmt.Errorf("status: %w", err)
	}
	ids, err := l.Holding().HeldIDs(ctx)
	if err != nil {
		return r, fmt.Errorf("status: %w", err)
	}
	r.HeldIDs = len(ids)
	temps, err := d.Temps()
	if err != nil {
		return r, fmt.Errorf("status: %w", err)
	}
	for _, t := range temps {
		r.Temps++
		if t.Stale {
			r.StaleTemps++
		}
	}
	unfinished, err := l.Replays().Unfinished(ctx)
	if err != nil {
		return r, fmt.Errorf("status: %w", err)
	}
	r.UnfinishedReplays = len(unfinished)
	if r.Discards, err = l.Discards().Counts(ctx); err != nil {
		return r, fmt.Errorf("status: %w", err)
	}
	retries, err := l.Messages().Retries(ctx)
	if err != nil {
		return r, fmt.Errorf("status: %w", err)
	}
	if r.Retries = len(retries); r.Retries > 0 {
		r.NextRetry = retries[0].NextAt
	}
	r.Outbox, err = l.Outbox().Stats(ctx)
	switch {
	case errors.Is(err, ledger.ErrNoOutbox):
		r.NoOutbox = true
	case err != nil:
		return r, fmt.Errorf("status: %w", err)
	case r.Outbox.Parked > 0:
		if r.Parked, err = l.Outbox().ParkedRows(ctx, maxParkedShown); err != nil {
			return r, fmt.Errorf("status: %w", err)
		}
	}
	if r.BatchFiles, err = l.Messages().RecentBatchFiles(ctx, maxBatchFilesShown); err != nil {
		return r, fmt.Errorf("status: %w", err)
	}
	return r, nil
}

// OldestInbox returns the modification time of the message that has the
// earliest one in inbox/ (whatever its name), zero when inbox/ holds no
// message. It lstats every message, never follows a link, never opens a
// file: one system call per waiting message. The modification time is the
// producer's: spool enqueue and a write-then-rename give the time the file
// was written, while a copy that preserves times (cp -p, rsync -t) carries
// the source's, which makes the message look older than its arrival.
func OldestInbox(ctx context.Context, d *queue.Dir) (time.Time, error) {
	var oldest int64
	found := false
	err := d.List(queue.Inbox, func(e queue.Entry) error {
		if !found || e.ModTime < oldest {
			oldest, found = e.ModTime, true
		}
		return ctx.Err()
	})
	if err != nil || !found {
		return time.Time{}, err
	}
	return time.Unix(0, oldest), nil
}

// StatusJSON is the machine-readable form of a StatusReport, for
// `spool status --json`. Its field names are stable; a field may be added,
// none is renamed or removed.
type StatusJSON struct {
	Queue string `json:"queue"`
	// Now is when the report was taken; ages are relative to it.
	Now time.Time `json:"now"`
	// Stages counts the messages of inbox, processing (claims in flight),
	// done and error.
	Stages map[string]int `json:"stages"`
	// OldestInbox is the modification time of the oldest message in
	// inbox/, and OldestAgeSeconds Now minus it; both null when inbox/
	// holds no message.
	OldestInbox      *time.Time `json:"oldest_inbox_mtime"`
	OldestAgeSeconds *float64   `json:"oldest_age_seconds"`
	// WaitingForDoneFile counts the data files in inbox/ that wait for
	// their done-file (not in stages.inbox), and
	// OldestWaitingForDoneFile is the earliest modification time among
	// them, null when none waits.
	WaitingForDoneFile       int        `json:"waiting_for_done_file"`
	OldestWaitingForDoneFile *time.Time `json:"oldest_waiting_for_done_file_mtime"`
	// DoneFilesWithoutData counts the done-files in inbox/ whose data file
	// is not there (announced, never written, or under another name).
	DoneFilesWithoutData int `json:"done_files_without_data"`
	// NotTaken counts the entries of inbox/ the queue never takes, not
	// starting with "." (not NAME.json, or not a name spool.conf's
	// include matches); NotTakenNames are the first 3 of them.
	NotTaken      int      `json:"inbox_not_taken"`
	NotTakenNames []string `json:"inbox_not_taken_names"`
	// NotTakenHint is Status.NamesHint: that case alone keeps one of them
	// out; omitted when none.
	NotTakenHint string     `json:"inbox_not_taken_hint,omitempty"`
	Ledger       LedgerJSON `json:"ledger"`
	// TempFiles counts the temp files in the queue; StaleTempFiles those
	// whose writer is gone (spool fsck --repair removes them).
	TempFiles      int `json:"temp_files"`
	StaleTempFiles int `json:"stale_temp_files"`
	// InterruptedReplays counts replays killed before they finished
	// (spool fsck --repair finishes them).
	InterruptedReplays int `json:"interrupted_replays"`
	// Discarded counts the dead letters discarded on purpose (spool
	// discard); InterruptedDiscards the discards killed before they
	// finished (spool fsck --repair finishes them).
	Discarded           int `json:"discarded"`
	InterruptedDiscards int `json:"interrupted_discards"`
	// RetriesWaiting counts the messages waiting for a retry; NextRetryAt
	// is when the soonest is due and NextRetryInSeconds how far that is
	// from now (negative once due), both null when none waits.
	RetriesWaiting     int        `json:"retries_waiting"`
	NextRetryAt        *time.Time `json:"next_retry_at"`
	NextRetryInSeconds *float64   `json:"next_retry_in_seconds"`
	// Outbox is the state of the ledger's outbox; null when the ledger's
	// schema has none yet.
	Outbox *OutboxJSON `json:"outbox"`
	// Paused is the queue's pause (spool pause), null while it is not
	// paused.
	Paused *PauseJSON `json:"paused"`
	// Held counts what is held aside (spool hold).
	Held HeldJSON `json:"held"`
	// BatchFiles are the batch files whose records were committed last
	// (at most 10, the latest first), with what became of their records
	// so far; [] when the queue has none.
	BatchFiles []BatchFileJSON `json:"batch_files"`
}

// BatchFileJSON is what became of one batch file's records, in a
// StatusJSON: those committed so far, by outcome, and when the last
// commit was.
type BatchFileJSON struct {
	File        string    `json:"file"`
	Processed   int64     `json:"processed"`
	Duplicates  int64     `json:"duplicates"`
	DeadLetters int64     `json:"dead_letters"`
	LastCommit  time.Time `json:"last_commit"`
}

// batchFileJSON is f as status --json and show --json give it.
func batchFileJSON(f ledger.BatchFile) BatchFileJSON {
	return BatchFileJSON{f.Name, f.Processed, f.Duplicates, f.DeadLetters, f.At.UTC()}
}

// PauseJSON is the queue's pause, in a StatusJSON: who paused it
// (by, with its role over HTTP and via), why and when.
type PauseJSON struct {
	By   string    `json:"by"`
	Role string    `json:"role"`
	Via  string    `json:"via"`
	Note string    `json:"note"`
	At   time.Time `json:"at"`
}

// HeldJSON counts what is held aside, in a StatusJSON: the messages in
// held/ and the msg_ids held.
type HeldJSON struct {
	Files  int `json:"files"`
	MsgIDs int `json:"msg_ids"`
}

// OutboxJSON is the outbox's state, in a StatusJSON.
type OutboxJSON struct {
	// Pending counts the rows not yet published nor parked; the oldest's
	// creation time and age are null when there is none. Failing counts
	// the pending rows that failed at least once.
	Pending                 int64      `json:"pending"`
	OldestPending           *time.Time `json:"oldest_pending_created_at"`
	OldestPendingAgeSeconds *float64   `json:"oldest_pending_age_seconds"`
	Failing                 int64      `json:"failing"`
	Parked                  int64      `json:"parked"`
	Published               int64      `json:"published"`
	// ParkedRows are the first parked rows (at most 10), by id.
	ParkedRows []ParkedJSON `json:"parked_rows"`
}

// ParkedJSON is one parked outbox row.
type ParkedJSON struct {
	ID        int64     `json:"id"`
	Aggregate string    `json:"aggregate"`
	Type      string    `json:"type"`
	Reason    string    `json:"reason"`
	Attempts  int       `json:"attempts"`
	ParkedAt  time.Time `json:"parked_at"`
}

// LedgerJSON is what the ledger holds, in a StatusJSON.
type LedgerJSON struct {
	Processed   int64 `json:"processed"`
	Duplicates  int64 `json:"duplicates"`
	DeadLetters int64 `json:"dead_letters"`
	// DeadLettersByReason counts dead-letter records per reason; reasons
	// with none are absent, and an empty ledger gives {}.
	DeadLettersByReason map[string]int64 `json:"dead_letters_by_reason"`
}

// JSON returns r in its machine-readable form.
func (r StatusReport) JSON() StatusJSON {
	j := StatusJSON{
		Queue: r.Path, Now: r.Now.UTC(),
		Stages: map[string]int{
			string(queue.Inbox): r.Inbox, string(queue.Processing): r.Processing,
			string(queue.Done): r.Done, string(queue.Error): r.Error,
		},
		Ledger: LedgerJSON{
			Processed: r.Ledger.Processed, Duplicates: r.Ledger.Duplicates,
			DeadLetters: r.Ledger.DeadLetters, DeadLettersByReason: map[string]int64{},
		},
		TempFiles: r.Temps, StaleTempFiles: r.StaleTemps, InterruptedReplays: r.UnfinishedReplays,
		RetriesWaiting: r.Retries, Discarded: r.Discards.Files, InterruptedDiscards: r.Discards.Pending,
		Held:       HeldJSON{Files: r.Held, MsgIDs: r.HeldIDs},
		BatchFiles: []BatchFileJSON{},
	}
	for _, f := range r.BatchFiles {
		j.BatchFiles = append(j.BatchFiles, batchFileJSON(f))
	}
	if p := r.Pause; p.Paused {
		j.Paused = &PauseJSON{By: p.By, Role: p.Role, Via: p.Via, Note: p.Note, At: p.At.UTC()}
	}
	if r.Retries > 0 {
		next, secs := r.NextRetry.UTC(), Seconds(r.NextRetry.Sub(r.Now))
		j.NextRetryAt, j.NextRetryInSeconds = &next, &secs
	}
	if age, ok := r.OldestAge(); ok {
		oldest, secs := r.Oldest.UTC(), Seconds(age)
		j.OldestInbox, j.OldestAgeSeconds = &oldest, &secs
	}
	j.DoneFilesWithoutData = r.OrphanDoneFiles
	j.NotTaken, j.NotTakenNames, j.NotTakenHint = r.NotTaken, r.NotTakenNames, r.NamesHint
	if j.NotTakenNames == nil {
		j.NotTakenNames = []string{}
	}
	if j.WaitingForDoneFile = r.WaitingForDoneFile; j.WaitingForDoneFile > 0 {
		w := r.WaitingOldest.UTC()
		j.OldestWaitingForDoneFile = &w
	}
	for reason, n := range r.Ledger.DeadLettersByReason {
		j.Ledger.DeadLettersByReason[string(reason)] = n
	}
	if !r.NoOutbox {
		o := &OutboxJSON{Pending: r.Outbox.Pending, Failing: r.Outbox.Failing, Parked: r.Outbox.Parked,
			Published: r.Outbox.Published, ParkedRows: []ParkedJSON{}}
		if !r.Outbox.Oldest.IsZero() {
			oldest, secs := r.Outbox.Oldest.UTC(), Seconds(max(r.Now.Sub(r.Outbox.Oldest), 0))
			o.OldestPending, o.OldestPendingAgeSeconds = &oldest, &secs
		}
		for _, p := range r.Parked {
			o.ParkedRows = append(o.ParkedRows, ParkedJSON{p.ID, p.Aggregate, p.Type, p.Reason, p.Attempts, p.Parked.UTC()})
		}
		j.Outbox = o
	}
	return j
}

// Seconds is d in seconds, to the millisecond: the unit of the JSON
// reports' ages.
func Seconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond)) / float64(time.Second)
}

// WriteStatus writes r for people: the stages with their counts and the
// age of the oldest waiting message, then what the ledger holds, with dead
// letters by reason (most frequent first).
func WriteStatus(w io.Writer, r StatusReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "queue\t%s\n", r.Path)
	if p := r.Pause; p.Paused {
		line := fmt.Sprintf("by %s since %s (%s ago)", Terminal(p.By), p.At.UTC().Format(time.RFC3339), Age(max(r.Now.Sub(p.At), 0)))
		if p.Note != "" {
			line += ": " + Terminal(p.Note)
		}
		fmt.Fprintf(tw, "PAUSED\t%s; no consumer claims until spool resume DIR\n", line)
	}
	inbox := fmt.Sprint(r.Inbox)
	if age, ok := r.OldestAge(); ok {
		inbox += fmt.Sprintf("  (oldest waiting %s)", Age(age))
	}
	fmt.Fprintf(tw, "inbox\t%s\n", inbox)
	if r.WaitingForDoneFile > 0 {
		fmt.Fprintf(tw, "\t%s waiting for a done-file (oldest written %s ago): not consumed until it exists\n",
			plural(int64(r.WaitingForDoneFile), "data file"), Age(max(r.Now.Sub(r.WaitingOldest), 0)))
	}
	if r.OrphanDoneFiles > 0 {
		what := "1 done-file without its data file"
		if r.OrphanDoneFiles > 1 {
			what = fmt.Sprintf("%d done-files without their data files", r.OrphanDoneFiles)
		}
		fmt.Fprintf(tw, "\t%s (announced, but not written under that name)\n", what)
	}
	if r.NotTaken > 0 {
		names := make([]string, len(r.NotTakenNames))
		for i, n := range r.NotTakenNames {
			names[i] = Terminal(n)
		}
		more := ""
		if r.NotTaken > len(names) {
			more = ", ..."
		}
		what := "1 entry"
		if r.NotTaken > 1 {
			what = fmt.Sprintf("%d entries", r.NotTaken)
		}
		hint := ""
		if r.NamesHint != "" {
			hint = " (" + Terminal(r.NamesHint) + ")"
		}
		fmt.Fprintf(tw, "\t%s the queue never takes, not named as its messages are (%s): %s%s%s\n",
			what, cmp.Or(r.NamesRule, "NAME.json"), strings.Join(names, ", "), more, hint)
	}
	fmt.Fprintf(tw, "processing\t%d\n", r.Processing)
	fmt.Fprintf(tw, "done\t%d\n", r.Done)
	fmt.Fprintf(tw, "error\t%d dead letters now\n", r.Error)
	if r.Held > 0 || r.HeldIDs > 0 {
		fmt.Fprintf(tw, "held\t%d in held/, %s held (spool holds lists them, spool release releases them)\n", r.Held, plural(int64(r.HeldIDs), "msg_id"))
	}
	if r.Retries > 0 {
		due := "due now"
		if wait := r.NextRetry.Sub(r.Now); wait > 0 {
			due = "due in " + Age(wait)
		}
		fmt.Fprintf(tw, "retries\t%d waiting, the next %s (spool flush makes them due)\n", r.Retries, due)
	}
	if r.Temps > 0 {
		fmt.Fprintf(tw, "temp files\t%d (%d stale: spool fsck --repair removes them)\n", r.Temps, r.StaleTemps)
	}
	if r.UnfinishedReplays > 0 {
		fmt.Fprintf(tw, "replays\t%d interrupted (spool fsck --repair finishes them)\n", r.UnfinishedReplays)
	}
	if r.Discards.Files > 0 || r.Discards.Pending > 0 {
		line := fmt.Sprintf("%s discarded on purpose (spool discard)", plural(int64(r.Discards.Files), "dead letter"))
		if r.Discards.Pending > 0 {
			line += fmt.Sprintf("; %d discards interrupted (spool fsck --repair finishes them)", r.Discards.Pending)
		}
		fmt.Fprintf(tw, "discards\t%s\n", line)
	}
	if o := r.Outbox; o.Pending+o.Parked+o.Published > 0 {
		line := fmt.Sprintf("%d pending", o.Pending)
		if !o.Oldest.IsZero() {
			line += fmt.Sprintf(" (oldest %s", Age(max(r.Now.Sub(o.Oldest), 0)))
			if o.Failing > 0 {
				line += fmt.Sprintf(", %d failing", o.Failing)
			}
			line += ")"
		}
		line += fmt.Sprintf(", %d parked, %d published", o.Parked, o.Published)
		fmt.Fprintf(tw, "outbox\t%s\n", line)
		for i, p := range r.Parked {
			label := ""
			if i == 0 {
				label = "parked"
			}
			fmt.Fprintf(tw, "%s\trow %d (%s of %s, %d attempts): %s\n", label, p.ID, p.Type, p.Aggregate, p.Attempts, clipReason(p.Reason))
		}
		if o.Parked > int64(len(r.Parked)) {
			fmt.Fprintf(tw, "\t... and %d more (spool relay DIR --unpark puts them back)\n", o.Parked-int64(len(r.Parked)))
		}
	}
	for i, f := range r.BatchFiles {
		label := ""
		if i == 0 {
			label = "batch files"
		}
		fmt.Fprintf(tw, "%s\t%s: %d processed, %s, %s (last commit %s ago)\n", label, Terminal(f.Name),
			f.Processed, plural(f.Duplicates, "duplicate"), plural(f.DeadLetters, "dead letter"), Age(max(r.Now.Sub(f.At), 0)))
	}
	fmt.Fprintf(tw, "ledger\t%d processed, %s, %s ever\n",
		r.Ledger.Processed, plural(r.Ledger.Duplicates, "duplicate"), plural(r.Ledger.DeadLetters, "dead letter"))
	type count struct {
		reason spool.Reason
		n      int64
	}
	var byReason []count
	for reason, n := range r.Ledger.DeadLettersByReason {
		byReason = append(byReason, count{reason, n})
	}
	slices.SortFunc(byReason, func(a, b count) int {
		return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.reason, b.reason))
	})
	for i, c := range byReason {
		label := ""
		if i == 0 {
			label = "dead letters ever"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\n", label, c.reason, c.n)
	}
	return tw.Flush()
}

// Age formats a duration for people, to the second: "45s", "3m07s",
// "5h02m", "2d03h".
func Age(d time.Duration) string {
	d = d.Round(time.Second)
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%02dh", s/86400, s%86400/3600)
}

// plural is "1 duplicate", "2 duplicates", "0 dead letters".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// clipReason is a park reason on one line of at most 200 bytes.
func clipReason(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

package report

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
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
	// Now is when the report was taken; ages are relative to it.
	Now time.Time
	// Ledger counts processed rows, duplicates and dead letters by reason.
	Ledger ledger.Stats
	// Temps counts the temp files in the queue (queue.Dir.Temps), and
	// StaleTemps those whose writer is gone: spool fsck --repair, enqueue
	// and consume remove them.
	Temps, StaleTemps int
	// UnfinishedReplays counts replays killed before they finished.
	UnfinishedReplays int
}

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
// message.
func Status(ctx context.Context, d *queue.Dir, l *ledger.DB) (StatusReport, error) {
	r := StatusReport{Path: d.Path(), Now: time.Now()}
	for _, c := range []struct {
		s queue.Stage
		n *int
	}{{queue.Inbox, &r.Inbox}, {queue.Processing, &r.Processing}, {queue.Done, &r.Done}, {queue.Error, &r.Error}} {
		n, err := d.Count(c.s)
		if err != nil {
			return r, fmt.Errorf("status: %w", err)
		}
		*c.n = n
	}
	var oldest int64
	err := d.List(queue.Inbox, func(e queue.Entry) error {
		if oldest == 0 || e.ModTime < oldest {
			oldest = e.ModTime
		}
		return ctx.Err()
	})
	if err != nil {
		return r, fmt.Errorf("status: %w", err)
	}
	if oldest != 0 {
		r.Oldest = time.Unix(0, oldest)
	}
	st, err := l.Stats(ctx)
	if err != nil {
		return r, fmt.Errorf("status: %w", err)
	}
	r.Ledger = st
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
	unfinished, err := l.UnfinishedReplays(ctx)
	if err != nil {
		return r, fmt.Errorf("status: %w", err)
	}
	r.UnfinishedReplays = len(unfinished)
	return r, nil
}

// WriteStatus writes r for people: the stages with their counts and the
// age of the oldest waiting message, then what the ledger holds, with dead
// letters by reason (most frequent first).
func WriteStatus(w io.Writer, r StatusReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "queue\t%s\n", r.Path)
	inbox := fmt.Sprint(r.Inbox)
	if age, ok := r.OldestAge(); ok {
		inbox += fmt.Sprintf("  (oldest waiting %s)", Age(age))
	}
	fmt.Fprintf(tw, "inbox\t%s\n", inbox)
	fmt.Fprintf(tw, "processing\t%d\n", r.Processing)
	fmt.Fprintf(tw, "done\t%d\n", r.Done)
	fmt.Fprintf(tw, "error\t%d\n", r.Error)
	if r.Temps > 0 {
		fmt.Fprintf(tw, "temp files\t%d (%d stale: spool fsck --repair removes them)\n", r.Temps, r.StaleTemps)
	}
	if r.UnfinishedReplays > 0 {
		fmt.Fprintf(tw, "replays\t%d interrupted (spool fsck --repair finishes them)\n", r.UnfinishedReplays)
	}
	fmt.Fprintf(tw, "ledger\t%d processed, %d duplicates, %d dead letters\n",
		r.Ledger.Processed, r.Ledger.Duplicates, r.Ledger.DeadLetters)
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
			label = "dead letters"
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

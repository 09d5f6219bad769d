package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// Place is where one file of a message is now.
type Place struct {
	Stage queue.Stage
	Name  string
	// Ino is the file's inode number; 0 when it was found by name.
	Ino uint64
}

// MessageStory is one message's story for `spool show`: where its files
// are now and everything the ledger holds about it.
type MessageStory struct {
	// Query is what the operator asked about: a msg_id or a file name.
	Query  string
	Places []Place
	ledger.Story
	// Discards are the discards (spool discard) of the message's files,
	// oldest first, each with only those files.
	Discards []ledger.DiscardBatch
	// Held are the records of its files held aside in held/ (spool hold),
	// and HeldID the hold of its msg_id, nil when it is not held.
	Held   []ledger.HeldFile
	HeldID *ledger.HeldID
	// BatchFiles are the batch files of the name asked about, the latest
	// first: what became of their records.
	BatchFiles []ledger.BatchFileStory
	// ReservationLive says whether the session of Story.Reservation
	// still has its directory in processing/: its call is in flight (or
	// its consumer died and is not recovered yet); else a consumer killed
	// while calling left it, and it holds the msg_id until that call
	// cannot be running.
	ReservationLive bool
}

// storyDeadLetters is how many dead letters of a batch file show names.
const storyDeadLetters = 10

// Found reports whether the queue knows anything of the message: a
// ledger record or a file in a stage.
func (m MessageStory) Found() bool {
	return !m.Story.Empty() || len(m.Places) > 0 || len(m.Discards) > 0 || len(m.Held) > 0 || m.HeldID != nil || len(m.BatchFiles) > 0
}

// Story finds what the queue knows of arg, a msg_id or the name of a
// message file (as it was in inbox/, or as it is in a stage). It looks in
// the ledger for a msg_id first, then for a file of that name, and finds
// the message's files in the stages by the inodes the ledger recorded and
// by their names. Look at Found for a message the queue never saw.
func Story(ctx context.Context, d *queue.Dir, l *ledger.DB, arg string) (MessageStory, error) {
	st, err := l.Messages().Story(ctx, arg, "")
	if err != nil {
		return MessageStory{}, err
	}
	if st.Empty() {
		id, ok, err := l.Messages().MsgIDOfFile(ctx, arg)
		if err != nil {
			return MessageStory{}, err
		}
		if !ok {
			// A message waiting for a retry has no delivery recorded yet.
			retries, err := l.Messages().Retries(ctx)
			if err != nil {
				return MessageStory{}, err
			}
			for _, r := range retries {
				if r.File == arg {
					id, ok = r.MsgID, true
				}
			}
		}
		if ok {
			st, err = l.Messages().Story(ctx, id, "")
		} else {
			st, err = l.Messages().Story(ctx, "", arg)
		}
		if err != nil {
			return MessageStory{}, err
		}
	}
	m := MessageStory{Query: arg, Story: st}
	// A discard knows the msg_id of a file the consumer rejected before
	// it had one (read from the file under the contract): arg may be it.
	id := st.MsgID
	if id == "" {
		id = arg
	}
	if m.Discards, err = l.Discards().Of(ctx, id, append(st.Files(), arg)); err != nil {
		return MessageStory{}, err
	}
	for _, b := range m.Discards {
		for _, it := range b.Items {
			if m.MsgID != "" || it.MsgID != arg {
				continue
			}
			if st.Empty() {
				// Its dead-letter record has no msg_id: found by the name.
				if m.Story, err = l.Messages().Story(ctx, "", it.File); err != nil {
					return MessageStory{}, err
				}
				st = m.Story
			}
			m.MsgID = arg
		}
	}
	var inos []uint64
	if st.ProcessedIno != 0 {
		inos = append(inos, st.ProcessedIno)
	}
	for _, dl := range st.Deliveries {
		if dl.Ino != 0 {
			inos = append(inos, dl.Ino)
		}
	}
	for _, r := range st.Replays {
		if r.Ino != 0 {
			inos = append(inos, r.Ino)
		}
	}
	if r := st.Reservation; r != nil {
		// Its claim in processing/, or where recovery put the file.
		if ino, ok := queue.ClaimInode(r.Claim); ok {
			inos = append(inos, ino)
		}
	}
	seen := map[string]bool{}
	if len(inos) > 0 {
		at, err := d.LocateAll(inos)
		if err != nil {
			return MessageStory{}, fmt.Errorf("show %s: %w", arg, err)
		}
		for _, ino := range inos {
			if loc, ok := at[ino]; ok && !seen[string(loc.Stage)+"/"+loc.Name] {
				seen[string(loc.Stage)+"/"+loc.Name] = true
				m.Places = append(m.Places, Place{Stage: loc.Stage, Name: loc.Name, Ino: ino})
			}
		}
	}
	names := append(st.Files(), arg)
	for _, s := range []queue.Stage{queue.Inbox, queue.Error, queue.Done, queue.Held} {
		for _, n := range names {
			if seen[string(s)+"/"+n] || strings.ContainsRune(n, '/') || n == "." || n == ".." {
				continue
			}
			_, err := os.Lstat(filepath.Join(d.StagePath(s), n))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return MessageStory{}, fmt.Errorf("show %s: %w", arg, err)
			}
			seen[string(s)+"/"+n] = true
			m.Places = append(m.Places, Place{Stage: s, Name: n})
		}
	}
	if err := claimPlaces(d, &m, names, seen); err != nil {
		return MessageStory{}, err
	}
	if err := addHeld(ctx, d, l, &m, arg); err != nil {
		return MessageStory{}, fmt.Errorf("show %s: %w", arg, err)
	}
	if m.BatchFiles, err = l.Messages().BatchFilesNamed(ctx, arg, storyDeadLetters); err != nil {
		return MessageStory{}, fmt.Errorf("show %s: %w", arg, err)
	}
	if r := m.Reservation; r != nil {
		if m.ReservationLive, err = d.HasSession(r.Owner); err != nil {
			return MessageStory{}, fmt.Errorf("show %s: %w", arg, err)
		}
	}
	return m, nil
}

// Shown escapes a name a producer chose for a terminal: a name with
// control or invalid bytes is printed quoted, so that it can neither move
// the cursor nor hide in the output.
func Shown(s string) string {
	for _, r := range s {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return strconv.QuoteToGraphic(s)
		}
	}
	return s
}

// WriteStory writes m for people, one fact a line.
func WriteStory(w io.Writer, m MessageStory, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	switch {
	case m.MsgID != "":
		p("msg_id", "%s", Shown(m.MsgID))
	case len(m.BatchFiles) > 0:
		p("file", "%s (a batch file)", Shown(m.Query))
	default:
		p("file", "%s (no valid msg_id)", Shown(m.Query))
	}
	if len(m.Places) == 0 {
		p("now", "in no stage (pruned, discarded or moved away)")
	}
	for _, pl := range m.Places {
		p("now", "%s", placeLine(m, pl))
	}
	if r := m.Processed; r != nil {
		p("processed", "%s from %s, sha256 %s", r.ProcessedAt.UTC().Format(time.RFC3339Nano), Shown(r.File), r.ContentHash)
		if h := r.Headers; h.Version != "" {
			p("version", "%s", Shown(h.Version))
		}
		if h := r.Headers; h.Trace != "" {
			p("traceparent", "%s", Shown(h.Trace))
		}
		if h := r.Headers; h.Tenant != "" {
			p("tenant", "%s", Shown(h.Tenant))
		}
	}
	for _, d := range m.Deliveries {
		switch {
		case d.Conflict:
			p("conflict", "%s %s: another body, sha256 %s", d.At.UTC().Format(time.RFC3339Nano), Shown(d.File), d.ContentHash)
		case d.Outcome == "duplicate":
			p("duplicate", "%s %s", d.At.UTC().Format(time.RFC3339Nano), Shown(d.File))
		default:
			line := fmt.Sprintf("%s %s: %s", d.At.UTC().Format(time.RFC3339Nano), Shown(d.File), d.Reason)
			if d.Field != "" {
				line += " (" + Shown(d.Field) + ")"
			}
			if d.Detail != "" {
				line += ": " + Shown(d.Detail)
			}
			if d.Attempts > 0 {
				line += fmt.Sprintf(" after %d attempts", d.Attempts)
			}
			p("dead letter", "%s", line)
		}
	}
	if r := m.Retry; r != nil {
		due := "due now"
		if r.NextAt.After(now) {
			due = "due in " + r.NextAt.Sub(now).Round(time.Second).String()
		}
		p("retry", "%d attempts failed, next %s (%s): %s", r.Attempts, r.NextAt.UTC().Format(time.RFC3339), due, Shown(r.LastError))
	}
	if r := m.Reservation; r != nil {
		p("reserved", "%s", reservationLine(*r, m.ReservationLive))
	}
	for _, r := range m.Replays {
		line := fmt.Sprintf("%s %s -> inbox/%s by %s", r.At.UTC().Format(time.RFC3339Nano), Shown(r.File), Shown(r.NewName), Shown(r.By))
		if r.Note != "" {
			line += ": " + Shown(r.Note)
		}
		p("replay", "%s", line)
	}
	for _, b := range m.Discards {
		for _, it := range b.Items {
			p("discarded", "%s", discardLine(b, it))
		}
	}
	for _, l := range heldLines(m) {
		p(l[0], "%s", l[1])
	}
	for _, f := range m.BatchFiles {
		p("batch file", "%s", batchFileLine(f))
		for _, n := range f.DeadLetterFiles {
			p("", "dead letter %s", Shown(n))
		}
		if more := f.DeadLetters - int64(len(f.DeadLetterFiles)); more > 0 {
			p("", "and %d more dead letters (spool errors DIR lists them)", more)
		}
	}
	return tw.Flush()
}

// reservationLine says who reserved a msg_id for a call, and whether the
// call is in flight or may outlive a consumer killed while it ran.
func reservationLine(r ledger.StoryReservation, live bool) string {
	line := fmt.Sprintf("%s for a call, by session %s (claim %s)", r.At.UTC().Format(time.RFC3339Nano), Shown(r.Owner), Shown(r.Claim))
	bound := "its call bound"
	if r.CallBound > 0 {
		bound += " (" + r.CallBound.String() + ")"
	}
	if live {
		return line + ": its session is in processing/, so its call is in flight or waits for a slot (or its consumer died and is not recovered yet)"
	}
	return line + ": that consumer is gone; its call may still run, so the msg_id is held until " + bound +
		" has passed since a consumer found it gone, or its calls lock is free"
}

// batchFileLine says what became of a batch file's records, as of its
// last commit, in the words of spool status.
func batchFileLine(f ledger.BatchFileStory) string {
	return fmt.Sprintf("%d processed, %s, %s (last commit %s)", f.Processed, plural(f.Duplicates, "duplicate"),
		plural(f.DeadLetters, "dead letter"), f.At.UTC().Format(time.RFC3339Nano))
}

// discardLine says what became of one discarded file, by whom and why.
func discardLine(b ledger.DiscardBatch, it ledger.DiscardItem) string {
	hash := it.ContentHash
	if hash == "" {
		hash = "none (not a regular file)"
	}
	line := fmt.Sprintf("%s error/%s (reason %s, sha256 %s) by %s", b.Created.UTC().Format(time.RFC3339Nano), Shown(it.File), Shown(it.Reason), hash, Shown(b.By))
	switch {
	case b.State != ledger.IntentDone:
		line += ", interrupted before it finished (spool fsck --repair finishes it)"
	case it.Outcome == ledger.DiscardMoved:
		line += ", moved to " + Shown(b.ToDir) + "/" + Shown(it.NewName)
	case it.Outcome == ledger.DiscardMissing:
		line += ", but it was gone from error/ already"
	default:
		line += ", deleted"
	}
	return line + ": " + Shown(b.Note)
}

// StoryJSON is MessageStory as `spool show --json` prints it.
type StoryJSON struct {
	Query      string           `json:"query"`
	MsgID      *string          `json:"msg_id"`
	Places     []PlaceJSON      `json:"places"`
	Processed  *ProcessedJSON   `json:"processed"`
	Deliveries []DeliveryJSON   `json:"deliveries"`
	Retry      *RetryJSON       `json:"retry"`
	Replays    []StoryReplayObj `json:"replays"`
	Discards   []DiscardJSON    `json:"discards"`
	// Held are its files held aside in held/, and MsgIDHeld the hold of
	// its msg_id (null when it is not held).
	Held      []StoryHeldJSON  `json:"held"`
	MsgIDHeld *StoryHeldIDJSON `json:"msg_id_held"`
	// BatchFiles are the batch files of that name, the latest first.
	BatchFiles []StoryBatchFileJSON `json:"batch_files"`
	// Reservation is the msg_id's reservation for a call, null when none.
	Reservation *ReservationJSON `json:"reservation"`
}

// ReservationJSON is a msg_id's reservation for a call: when, by which
// session, for which claim, the session's call bound in seconds (null
// when unknown), and whether the session's directory is still in
// processing/ (its call in flight, or its consumer not yet recovered).
type ReservationJSON struct {
	At                  time.Time `json:"at"`
	Session             string    `json:"session"`
	Claim               string    `json:"claim"`
	CallBoundSeconds    *float64  `json:"call_bound_seconds"`
	SessionInProcessing bool      `json:"session_in_processing"`
}

// DiscardJSON is one discarded file of the message: state is the
// discard's (pending, staged, done), outcome the file's once done
// (deleted, moved, missing), to and new_name where a move put it.
type DiscardJSON struct {
	At          time.Time  `json:"at"`
	Finished    *time.Time `json:"finished_at"`
	File        string     `json:"file"`
	MsgID       *string    `json:"msg_id"`
	Reason      string     `json:"reason"`
	ContentHash *string    `json:"content_hash"`
	Size        int64      `json:"size"`
	By          string     `json:"by"`
	Note        string     `json:"note"`
	State       string     `json:"state"`
	Outcome     *string    `json:"outcome"`
	To          *string    `json:"to"`
	NewName     *string    `json:"new_name"`
}

// PlaceJSON is a Place.
type PlaceJSON struct {
	Stage string `json:"stage"`
	Name  string `json:"name"`
}

// ProcessedJSON is the processed row of a message.
type ProcessedJSON struct {
	ProcessedAt time.Time `json:"processed_at"`
	File        string    `json:"file"`
	ContentHash string    `json:"content_hash"`
	Claim       string    `json:"claim"`
	// Headers are the message's schema version, traceparent and tenant,
	// each left out when it carried none.
	Headers spool.MessageHeaders `json:"headers"`
}

// DeliveryJSON is a duplicate, conflict or dead-letter delivery.
type DeliveryJSON struct {
	At          time.Time  `json:"at"`
	File        string     `json:"file"`
	Outcome     string     `json:"outcome"`
	Conflict    bool       `json:"conflict"`
	Reason      *string    `json:"reason"`
	Field       *string    `json:"field"`
	Detail      *string    `json:"detail"`
	ContentHash *string    `json:"content_hash"`
	Attempts    int        `json:"attempts"`
	LastFailure *time.Time `json:"last_failure"`
}

// RetryJSON is a pending retry; due_in_seconds is negative once due.
type RetryJSON struct {
	Attempts     int       `json:"attempts"`
	FirstFailure time.Time `json:"first_failure"`
	LastFailure  time.Time `json:"last_failure"`
	NextAt       time.Time `json:"next_at"`
	DueInSeconds float64   `json:"due_in_seconds"`
	LastError    string    `json:"last_error"`
}

// StoryReplayObj is one replay of the message's files.
type StoryReplayObj struct {
	At      time.Time `json:"at"`
	File    string    `json:"file"`
	NewName string    `json:"new_name"`
	By      string    `json:"by"`
	Note    *string   `json:"note"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// JSON returns the story as `spool show --json` prints it, durations in
// seconds.
func (m MessageStory) JSON(now time.Time) StoryJSON {
	out := StoryJSON{Query: m.Query, MsgID: optional(m.MsgID), Places: []PlaceJSON{}, Deliveries: []DeliveryJSON{}, Replays: []StoryReplayObj{}, Discards: []DiscardJSON{}}
	for _, b := range m.Discards {
		for _, it := range b.Items {
			j := DiscardJSON{At: b.Created.UTC(), File: it.File, MsgID: optional(it.MsgID), Reason: it.Reason,
				ContentHash: optional(it.ContentHash), Size: it.Size, By: b.By, Note: b.Note, State: b.State,
				Outcome: optional(string(it.Outcome)), To: optional(b.ToDir), NewName: optional(it.NewName)}
			if !b.Finished.IsZero() {
				t := b.Finished.UTC()
				j.Finished = &t
			}
			out.Discards = append(out.Discards, j)
		}
	}
	for _, p := range m.Places {
		out.Places = append(out.Places, PlaceJSON{Stage: string(p.Stage), Name: p.Name})
	}
	if r := m.Processed; r != nil {
		out.Processed = &ProcessedJSON{ProcessedAt: r.ProcessedAt.UTC(), File: r.File, ContentHash: r.ContentHash, Claim: r.Claim, Headers: r.Headers}
	}
	for _, d := range m.Deliveries {
		j := DeliveryJSON{At: d.At.UTC(), File: d.File, Outcome: string(d.Outcome), Conflict: d.Conflict,
			Reason: optional(string(d.Reason)), Field: optional(d.Field), Detail: optional(d.Detail),
			ContentHash: optional(d.ContentHash), Attempts: d.Attempts}
		if !d.LastFailure.IsZero() {
			t := d.LastFailure.UTC()
			j.LastFailure = &t
		}
		out.Deliveries = append(out.Deliveries, j)
	}
	if r := m.Retry; r != nil {
		out.Retry = &RetryJSON{Attempts: r.Attempts, FirstFailure: r.FirstFailure.UTC(), LastFailure: r.LastFailure.UTC(),
			NextAt: r.NextAt.UTC(), DueInSeconds: r.NextAt.Sub(now).Seconds(), LastError: r.LastError}
	}
	for _, r := range m.Replays {
		out.Replays = append(out.Replays, StoryReplayObj{At: r.At.UTC(), File: r.File, NewName: r.NewName, By: r.By, Note: optional(r.Note)})
	}
	heldJSON(m, &out)
	if r := m.Reservation; r != nil {
		j := &ReservationJSON{At: r.At.UTC(), Session: r.Owner, Claim: r.Claim, SessionInProcessing: m.ReservationLive}
		if r.CallBound > 0 {
			b := r.CallBound.Seconds()
			j.CallBoundSeconds = &b
		}
		out.Reservation = j
	}
	out.BatchFiles = []StoryBatchFileJSON{}
	for _, f := range m.BatchFiles {
		names := f.DeadLetterFiles
		if names == nil {
			names = []string{}
		}
		out.BatchFiles = append(out.BatchFiles, StoryBatchFileJSON{batchFileJSON(f.BatchFile), names})
	}
	return out
}

// StoryBatchFileJSON is a batch file of the name asked about, as spool
// status --json gives it, with the names of its first dead letters (at
// most 10; dead_letters counts them all).
type StoryBatchFileJSON struct {
	BatchFileJSON
	DeadLetterFiles []string `json:"dead_letter_files"`
}

// Package fsck reconciles a queue directory with its ledger, as postsuper -s
// does for Postfix's queue: it finds where the two disagree, and repairs
// what can be repaired without guessing (docs/DESIGN.md, "fsck").
//
// Check streams the stages and the ledger: the files the ledger recorded
// and those of the stages are kept as sorted slices of keys (an inode and a
// hash of the name, 16 bytes a file), never as maps of names, so a million
// files in done/ cost a few tens of megabytes; only files with no record by
// key are read.
package fsck

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// Kinds of finding, stable strings for scripts (--json).
const (
	// OtherQueue: the ledger belongs to another queue. Nothing else is
	// checked; nothing can be repaired.
	OtherQueue = "other-queue"
	// NoQueueID: the queue has no queue.id, and the ledger belongs to a
	// queue. Repaired by writing the ledger's identity back, when every
	// file in done/ and error/ is known to the ledger; when one is not,
	// Repair repairs nothing at all.
	NoQueueID = "no-queue-id"
	// Unbound: neither the queue nor the ledger has recorded the other yet
	// (a queue made before identities existed). Informational; repaired by
	// binding them.
	Unbound = "unbound"
	// DoneUnrecorded: a file in done/ whose message has no processed or
	// duplicate record: rows were lost. Repaired by recording it again.
	DoneUnrecorded = "done-unrecorded"
	// DoneInvalid: a file in done/ with no record that is not a valid
	// message under the contract: it cannot have been processed. Not
	// repaired: an operator decides.
	DoneInvalid = "done-invalid"
	// KeptAfterPrune: a file in done/ with no record that got there
	// before the prune horizon (ledger.Fsck.PruneHorizon): spool prune
	// removed its row and, without --files, kept the file. Informational:
	// never read, never recorded again; spool prune --files removes it.
	KeptAfterPrune = "kept-after-prune"
	// ErrorUnrecorded: a file in error/ with no dead-letter record.
	// Repaired with a record of reason unknown.
	ErrorUnrecorded = "error-unrecorded"
	// DeadLetterMissing: a dead-letter record whose file is gone from
	// error/, neither replayed nor discarded: removed by hand. The
	// console no longer lists it (report.InError). Repaired by retiring it
	// from the dead-letter index (ledger.ExitRemoved); the record stays,
	// as history.
	DeadLetterMissing = "dead-letter-missing"
	// DeadLetterReplaced: a dead-letter record whose file was edited in
	// error/ (a new inode) and then replayed or discarded, which the
	// ledger could not tie to the record as it happened (it had a
	// collision suffix, or two dead letters of one name were in error/).
	// Informational; repaired by retiring it.
	DeadLetterReplaced = "dead-letter-replaced"
	// ProcessedWithoutFile: a processed row whose file is in no stage.
	// Informational: prune and operators remove files from done/.
	ProcessedWithoutFile = "processed-without-file"
	// DeadClaims: claims of dead consumers still in processing/. Repaired
	// by recovering them, as a consumer's start does.
	DeadClaims = "dead-claims"
	// TempFiles: temp files of killed producers, and directories of
	// consumers killed while joining. Repaired by removing the stale ones.
	TempFiles = "temp-files"
	// InterruptedReplay: a replay killed before it finished. Repaired by
	// finishing it.
	InterruptedReplay = "interrupted-replay"
	// InterruptedDiscard: a discard killed before it finished; its files
	// are still in error/, some under hidden staging names. Repaired by
	// finishing it.
	InterruptedDiscard = "interrupted-discard"
	// Discarded: dead letters removed from error/ on purpose (spool
	// discard), as the ledger records them. Informational: they are
	// neither missing nor a disagreement.
	Discarded = "discarded"
	// Copied: no file the ledger recorded has its recorded inode, and some
	// were found by name instead: the queue was copied or restored (cp
	// -a, rsync, a backup), which gives every file a new inode.
	// Informational: the files are there.
	Copied = "copied"
	// Held: messages held aside in held/ (spool hold). Informational:
	// held, not lost.
	Held = "held"
	// HeldUnrecorded: files in held/ without a hold record (a hold killed
	// between its move and its record, or a file put there by hand).
	// Informational: held all the same; spool release releases them.
	HeldUnrecorded = "held-unrecorded"
	// HeldMissing: a hold record whose file is gone from held/, neither
	// released nor consumed: removed by hand. Repaired by forgetting the
	// record; the audit keeps who held it.
	HeldMissing = "held-missing"
	// HeldReservations: consumer sessions gone from processing/ that
	// still hold reservations of msg_ids for their calls. Informational:
	// a killed consumer's call may still run. Repaired, for a session
	// whose calls lock is free, by releasing them; a consumer with a
	// Caller (--post, --exec) releases the others once their calls
	// cannot run (the call bound passed since it found the session
	// gone). spool show MSG_ID tells of one.
	HeldReservations = "held-reservations"
	// StaleCallsLocks: calls locks (.calls/SESSION) of sessions gone from
	// processing/ that hold no reservation. Informational; repaired by
	// removing them, as a consumer's start does.
	StaleCallsLocks = "stale-calls-locks"
	// StrayDoneFiles: done-files in error/ that announce no file there,
	// left by a consumer killed between moving a batch file's done-file
	// and the file (the file came in later beside it, under a suffixed
	// name with a done-file of its own), or by an operator who moved or
	// removed the file alone. Informational: no replay or discard will
	// ever take them; remove them by hand once looked at.
	StrayDoneFiles = "stray-done-files"
	// DoneChanged: a batch file in done/ whose size or modification time
	// is not what it was when it was claimed (its progress identity): a
	// producer wrote it in place, without a done-file or --min-age, and
	// went on after the claim; what it wrote then was not consumed. Not
	// repaired: an operator puts the file back into inbox/ under a new
	// name, where its records read before are absorbed as duplicates.
	DoneChanged = "done-changed"
	// PendingDeadLetters: files in error/ without a dead-letter record
	// that are the one-record dead letters of a batch file not finished
	// (in inbox/, processing/ or held/): a chunk's dead letters are
	// written before the transaction that records them, and the run that
	// resumes the file finds and records them (a consumer killed, or out
	// of disk space, between the two). Informational; not repaired, which
	// would record them a second time beside the resumed run's.
	PendingDeadLetters = "pending-dead-letters"
	// Rebuilding: the ledger is marked as being rebuilt from the
	// directories (ledger.BeginRebuild), by a repair running now or killed
	// before it was complete; every command refuses it meanwhile.
	// Repaired by completing the rebuild.
	Rebuilding = "rebuilding"
)

// Finding is one kind of disagreement, with how many and a few examples.
type Finding struct {
	Kind  string `json:"kind"`
	Count int    `json:"count"`
	// Examples names a few of them (files, relative to the queue).
	Examples []string `json:"examples,omitempty"`
	// Info marks a finding that is not a problem by itself; fsck exits 0
	// when every finding is informational.
	Info bool `json:"informational,omitempty"`
	// Text says it in a sentence.
	Text string `json:"text"`
}

// Report is what Check found.
type Report struct {
	Queue    string    `json:"queue"`
	QueueID  string    `json:"queue_id,omitempty"`
	Findings []Finding `json:"findings"`
}

// Problems is the number of findings that are not informational.
func (r *Report) Problems() int {
	n := 0
	for _, f := range r.Findings {
		if !f.Info {
			n++
		}
	}
	return n
}

// Options tune Check and Repair.
type Options struct {
	// Contract parses files of done/ that the ledger has no record of.
	Contract spool.Contract
	// Lease is the claim lease of other hosts' consumers. Zero:
	// queue.DefaultLease.
	Lease time.Duration
	// Examples is how many examples a finding keeps. Zero: 5.
	Examples int
	// Log receives one line per repair made (Repair only).
	Log func(line string)
	// Consumer names the repairer in the records it writes; empty: fsck
	// with the host and pid.
	Consumer string
	// Begin, when set, is called by Repair once, before its first change
	// and only after the queue and the ledger are known to belong
	// together: a Repair that finds another queue's ledger or an unreadable
	// queue.id changes nothing and does not call it. An error from Begin
	// ends the Repair with nothing changed. The command line writes its
	// audit row here.
	Begin func(ctx context.Context) error
}

func (o Options) withDefaults() Options {
	o.Lease = cmp.Or(o.Lease, queue.DefaultLease)
	o.Examples = cmp.Or(o.Examples, 5)
	if o.Log == nil {
		o.Log = func(string) {}
	}
	if o.Consumer == "" {
		o.Consumer = "fsck-" + strconv.Itoa(os.Getpid()) + "@" + queue.Host()
	}
	return o
}

// finding accumulates one kind.
type finding struct {
	Finding
	max int
}

func (f *finding) add(example string) {
	f.Count++
	if len(f.Examples) < f.max {
		f.Examples = append(f.Examples, example)
	}
}

// checker is one run of Check or Repair.
type checker struct {
	d      *queue.Dir
	l      *ledger.DB
	o      Options
	repair bool
	now    time.Time
	// staged holds the keys of every file in every stage, sorted, for the
	// processed rows' side of the comparison.
	staged []fileKey
	// byInode counts the files found under their recorded inode, moved
	// those found by name (or msg_id) under another one; every file moved
	// and none by inode is a copied queue.
	byInode, moved int
	// rebuilding is set once Repair has marked the ledger as being
	// rebuilt: the mark comes off when the run is complete.
	rebuilding bool
}

// Check compares the queue with the ledger and reports every disagreement.
// It changes nothing.
func Check(ctx context.Context, d *queue.Dir, l *ledger.DB, o Options) (*Report, error) {
	c := &checker{d: d, l: l, o: o.withDefaults(), now: time.Now()}
	return c.run(ctx)
}

// Repair repairs what can be repaired without guessing, saying what it
// does through o.Log, then checks again and returns what is left. It is
// idempotent: a second Repair finds nothing more to do.
//
// A ledger that holds no record while done/ or error/ holds files is
// rebuilt from the directories: it is bound to the queue and marked
// before its first row, so that no consumer takes it half-filled, and the
// mark is removed once the repair is complete (see rebuild.go). A Repair
// that fails or is killed leaves the mark, and the next one finishes the
// rebuild.
func Repair(ctx context.Context, d *queue.Dir, l *ledger.DB, o Options) (*Report, error) {
	c := &checker{d: d, l: l, o: o.withDefaults(), now: time.Now(), repair: true}
	qid, lid, err := c.identity(ctx)
	if err != nil {
		return nil, err
	}
	if qid != "" && lid != "" && qid != lid {
		return Check(ctx, d, l, o) // another queue's ledger: reported, never repaired
	}
	if o.Begin != nil {
		if err := o.Begin(ctx); err != nil {
			return nil, err
		}
	}
	if err := c.beginRebuild(ctx); err != nil {
		return nil, err
	}
	if _, err := c.run(ctx); err != nil {
		return nil, err
	}
	if err := c.endRebuild(ctx); err != nil {
		return nil, err
	}
	return Check(ctx, d, l, o)
}

func (c *checker) newFinding(kind string, info bool) *finding {
	return &finding{Finding: Finding{Kind: kind, Info: info}, max: c.o.Examples}
}

func (c *checker) run(ctx context.Context) (*Report, error) {
	r := &Report{Queue: c.d.Path(), Findings: []Finding{}} // [] in JSON, not null
	qid, lid, err := c.identity(ctx)
	if err != nil {
		return nil, err
	}
	r.QueueID = cmp.Or(qid, lid)
	if qid != "" && lid != "" && qid != lid {
		r.Findings = append(r.Findings, Finding{Kind: OtherQueue, Count: 1,
			Text: fmt.Sprintf("the ledger belongs to queue %s, and this queue is %s; nothing else was checked", lid, qid)})
		return r, nil
	}
	if c.repair && qid == "" && lid != "" {
		// The queue lost its queue.id, and the ledger belongs to a queue.
		// If the ledger does not know every file of done/ and error/,
		// this may be another queue pointed at that ledger: recording its
		// files there, or recovering its claims by that ledger's records,
		// would be a guess. So nothing is repaired until the operator
		// says which queue this is.
		pre, err := (&checker{d: c.d, l: c.l, o: c.o, now: c.now}).run(ctx)
		if err != nil {
			return nil, err
		}
		unknown := 0
		for _, f := range pre.Findings {
			if f.Kind == DoneUnrecorded || f.Kind == DoneInvalid || f.Kind == ErrorUnrecorded {
				unknown += f.Count
			}
		}
		if unknown > 0 {
			c.o.Log(fmt.Sprintf("not repaired: %s is missing, and the ledger of queue %s does not know %d files of done/ and error/, so it may be another queue's; nothing was repaired. If %s is that queue, write %s into %s/%s and run spool fsck --repair again",
				queue.IDFile, lid, unknown, c.d.Path(), lid, c.d.Path(), queue.IDFile))
			c.repair = false
		}
	}
	if f, err := c.rebuildMark(ctx); err != nil {
		return nil, err
	} else if f != nil {
		r.Findings = append(r.Findings, f.Finding)
	}
	// Temp files before dead claims: recovering claims also removes the
	// stale directories of consumers killed while joining, without a
	// word, and the temps step removes them saying so.
	steps := []func(context.Context) (*finding, error){
		c.replays, c.discards, c.temps, c.deadClaims, c.reservations, c.callsLocks,
	}
	var findings []*finding
	for _, step := range steps {
		f, err := step(ctx)
		if err != nil {
			return nil, err
		}
		findings = append(findings, f)
	}
	done, invalid, kept, changed, err := c.done(ctx)
	if err != nil {
		return nil, err
	}
	errs, pending, err := c.errorStage(ctx)
	if err != nil {
		return nil, err
	}
	deadMissing, deadReplaced, err := c.deadLetters(ctx)
	if err != nil {
		return nil, err
	}
	orphans, err := c.processed(ctx)
	if err != nil {
		return nil, err
	}
	discarded, err := c.discarded(ctx)
	if err != nil {
		return nil, err
	}
	held, err := c.held(ctx)
	if err != nil {
		return nil, err
	}
	strays, err := c.strayDoneFiles()
	if err != nil {
		return nil, err
	}
	findings = append(findings, done, invalid, kept, changed, errs, pending, deadMissing, deadReplaced, orphans, discarded, strays)
	findings = append(findings, held...)
	if c.byInode == 0 && c.moved > 0 {
		f := c.newFinding(Copied, true)
		f.Count = c.moved
		f.Text = fmt.Sprintf("the queue was copied or restored: none of its files has the inode the ledger recorded, and %d were matched by name instead", c.moved)
		findings = append(findings, f)
	}
	if f, err := c.bind(ctx, qid, lid, done.Count+errs.Count); err != nil {
		return nil, err
	} else if f != nil {
		findings = append(findings, f)
	}
	for _, f := range findings {
		if f.Count > 0 {
			r.Findings = append(r.Findings, f.Finding)
		}
	}
	return r, nil
}

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
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/replay"
	"github.com/spoolq/spool/report"
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
	// ErrorUnrecorded: a file in error/ with no dead-letter record.
	// Repaired with a record of reason unknown.
	ErrorUnrecorded = "error-unrecorded"
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
}

// fileKey identifies a file by its inode and a hash of its name. An inode
// alone names a file only while it exists: ext4 and tmpfs give a freed
// inode to the next new file at once, so a record of a file removed from
// done/ would pass for the record of an unrelated file that got its inode.
// The name tells them apart, as report.Errors does for error/.
type fileKey struct{ ino, name uint64 }

func compareKeys(a, b fileKey) int {
	return cmp.Or(cmp.Compare(a.ino, b.ino), cmp.Compare(a.name, b.name))
}

// recordedKey is the key of a file the ledger recorded under name.
func recordedKey(ino uint64, name string) fileKey {
	return fileKey{ino, nameHash(storedName(name))}
}

// stageKeys appends the keys a file of a stage may have been recorded
// under: its name, and when the name carries a collision suffix
// ("a~2.json") that a move into the stage may have added, the name without
// it. A file recorded under a name neither matches (the suffix shortened
// its stem to fit NAME_MAX) is read, which costs time but not correctness.
func stageKeys(keys []fileKey, ino uint64, name string) []fileKey {
	name = storedName(name)
	keys = append(keys, fileKey{ino, nameHash(name)})
	if stem, ok := strings.CutSuffix(name, ".json"); ok {
		if i := strings.LastIndexByte(stem, '~'); i > 0 && i < len(stem)-1 && strings.Trim(stem[i+1:], "0123456789") == "" {
			keys = append(keys, fileKey{ino, nameHash(stem[:i] + ".json")})
		}
	}
	return keys
}

func nameHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// storedName is name as the ledger stores file names: valid UTF-8 without
// NUL (see ledger's clean).
func storedName(name string) string {
	if utf8.ValidString(name) && !strings.Contains(name, "\x00") {
		return name
	}
	return strings.ReplaceAll(strings.ToValidUTF8(name, "\uFFFD"), "\x00", "\uFFFD")
}

// knownFiles returns the keys of every file the ledger recorded as
// processed or as a duplicate, sorted and without repeats.
func (c *checker) knownFiles(ctx context.Context) ([]fileKey, error) {
	var known []fileKey
	err := c.l.EachKnownFile(ctx, func(ino uint64, file string) error {
		known = append(known, recordedKey(ino, file))
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(known, compareKeys)
	return slices.Compact(known), nil
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
func Repair(ctx context.Context, d *queue.Dir, l *ledger.DB, o Options) (*Report, error) {
	c := &checker{d: d, l: l, o: o.withDefaults(), now: time.Now(), repair: true}
	if _, err := c.run(ctx); err != nil {
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
	// Temp files before dead claims: recovering claims also removes the
	// stale directories of consumers killed while joining, without a
	// word, and the temps step removes them saying so.
	steps := []func(context.Context) (*finding, error){
		c.replays, c.temps, c.deadClaims,
	}
	var findings []*finding
	for _, step := range steps {
		f, err := step(ctx)
		if err != nil {
			return nil, err
		}
		findings = append(findings, f)
	}
	done, invalid, err := c.done(ctx)
	if err != nil {
		return nil, err
	}
	errs, err := c.errorStage(ctx)
	if err != nil {
		return nil, err
	}
	orphans, err := c.processed(ctx)
	if err != nil {
		return nil, err
	}
	findings = append(findings, done, invalid, errs, orphans)
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

// identity returns the queue's and the ledger's record of the queue.
func (c *checker) identity(ctx context.Context) (qid, lid string, err error) {
	if qid, err = c.d.ID(); err != nil {
		return "", "", err
	}
	if lid, err = c.l.QueueID(ctx); err != nil {
		return "", "", err
	}
	return qid, lid, nil
}

// bind reports (and repairs) a queue and ledger that are not yet bound to
// each other. unknown counts the files of done/ and error/ the ledger had
// no record of before this run: a ledger that knew none of them is taken
// as this queue's.
func (c *checker) bind(ctx context.Context, qid, lid string, unknown int) (*finding, error) {
	switch {
	case qid != "" && qid == lid:
		return nil, nil
	case lid != "": // the queue lost its queue.id
		f := c.newFinding(NoQueueID, false)
		f.Count = 1
		f.Text = fmt.Sprintf("the queue has no %s, and the ledger belongs to queue %s", queue.IDFile, lid)
		if c.repair {
			if unknown > 0 {
				c.o.Log(fmt.Sprintf("not repaired: %s left missing, since the ledger did not know %d files of done/ and error/: it may be another queue's", queue.IDFile, unknown))
				return f, nil
			}
			if err := c.d.SetID(lid); err != nil {
				return nil, err
			}
			c.o.Log(fmt.Sprintf("repaired %s: wrote the ledger's queue identity %s back", queue.IDFile, lid))
		}
		return f, nil
	}
	f := c.newFinding(Unbound, true)
	f.Count = 1
	f.Text = "the queue and the ledger are not bound to each other yet (a queue made before queue identities); consume or fsck --repair binds them"
	if c.repair {
		id, err := ledger.Bind(ctx, c.l, c.d, ledger.BindNew)
		if err != nil {
			return nil, err
		}
		c.o.Log(fmt.Sprintf("repaired identity: bound the ledger to queue %s", id))
	}
	return f, nil
}

func (c *checker) replays(ctx context.Context) (*finding, error) {
	f := c.newFinding(InterruptedReplay, false)
	if c.repair {
		done, err := replay.Resume(ctx, c.d, c.l)
		if err != nil {
			return nil, err
		}
		for _, fin := range done {
			c.o.Log(fmt.Sprintf("repaired replay %d by %s: finished, %d of its %d files replayed", fin.Intent.ID, fin.Intent.By, len(fin.Replays), len(fin.Intent.Items)))
		}
	}
	intents, err := c.l.UnfinishedReplays(ctx)
	if err != nil {
		return nil, err
	}
	if len(intents) > 0 && !c.repair {
		// A replay that holds the lock is running, not interrupted: it
		// finishes its own intent and any older one before it selects.
		// (Repair took the lock above, waiting for it to finish.)
		running, err := c.d.ReplayRunning()
		if err != nil {
			return nil, err
		}
		if running {
			intents = nil
		}
	}
	for _, in := range intents {
		f.add(fmt.Sprintf("replay %d by %s at %s, %d files, %s", in.ID, in.By, in.Created.Format(time.RFC3339), len(in.Items), in.State))
	}
	f.Text = fmt.Sprintf("%d replays were interrupted before they finished", f.Count)
	return f, nil
}

func (c *checker) deadClaims(ctx context.Context) (*finding, error) {
	f := c.newFinding(DeadClaims, false)
	if c.repair {
		cons, err := spool.NewConsumer(c.d, c.l, spool.Config{Contract: c.o.Contract, Lease: c.o.Lease})
		if err != nil {
			return nil, err
		}
		n, err := cons.Recover(ctx)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			c.o.Log(fmt.Sprintf("repaired processing/: recovered %d claims of dead consumers", n))
		}
	}
	claims, err := c.d.DeadClaims(c.o.Lease)
	if err != nil {
		return nil, err
	}
	for _, cl := range claims {
		f.add("processing/" + cl.Session + "/" + cl.Name)
	}
	f.Text = fmt.Sprintf("%d claims of dead consumers are still in processing/", f.Count)
	return f, nil
}

func (c *checker) temps(context.Context) (*finding, error) {
	f := c.newFinding(TempFiles, false)
	if c.repair {
		removed, err := c.d.RemoveStaleTemps()
		for _, t := range removed {
			c.o.Log(fmt.Sprintf("repaired %s: removed a stale temp file (%d bytes, %s old)", t.Path(), t.Size, time.Since(t.ModTime).Round(time.Second)))
		}
		if err != nil {
			return nil, err
		}
	}
	temps, err := c.d.Temps()
	if err != nil {
		return nil, err
	}
	live := 0
	for _, t := range temps {
		if t.Stale {
			f.add(t.Path())
		} else {
			live++
		}
	}
	f.Text = fmt.Sprintf("%d stale temp files of killed producers or consumers", f.Count)
	if live > 0 {
		f.Text += fmt.Sprintf(" (and %d being written now)", live)
	}
	return f, nil
}

// pendingBatch is how many unknown files of done/ are resolved at a time.
const pendingBatch = 256

// done compares done/ with the ledger: every file must be known by its key,
// or its message's msg_id must have a processed row.
func (c *checker) done(ctx context.Context) (unrecorded, invalid *finding, err error) {
	unrecorded, invalid = c.newFinding(DoneUnrecorded, false), c.newFinding(DoneInvalid, false)
	known, err := c.knownFiles(ctx)
	if err != nil {
		return nil, nil, err
	}
	var pending []queue.Entry
	flush := func() error {
		err := c.resolveDone(ctx, pending, unrecorded, invalid)
		pending = pending[:0]
		return err
	}
	err = c.d.List(queue.Done, func(e queue.Entry) error {
		n := len(c.staged)
		c.staged = stageKeys(c.staged, e.Ino, e.Name)
		for _, k := range c.staged[n:] {
			if _, ok := slices.BinarySearchFunc(known, k, compareKeys); ok {
				return nil
			}
		}
		if pending = append(pending, e); len(pending) == pendingBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return nil, nil, err
	}
	unrecorded.Text = fmt.Sprintf("%d files in done/ have no processed or duplicate record (rows lost)", unrecorded.Count)
	invalid.Text = fmt.Sprintf("%d files in done/ have no record and are not valid messages", invalid.Count)
	return unrecorded, invalid, nil
}

// resolveDone reads the files of done/ unknown by key: one whose msg_id
// has a processed row is recorded; any other is reported, and repaired.
func (c *checker) resolveDone(ctx context.Context, entries []queue.Entry, unrecorded, invalid *finding) error {
	if len(entries) == 0 {
		return nil
	}
	var (
		files []ledger.RepairedFile
		ids   []string
	)
	for _, e := range entries {
		data, err := c.d.ReadEntry(queue.Done, e, c.o.Contract.Limit())
		if errors.Is(err, os.ErrNotExist) {
			continue // pruned meanwhile
		}
		var m *spool.Message
		if err == nil {
			m, err = c.o.Contract.Parse(data)
		}
		if err != nil {
			invalid.add("done/" + e.Name)
			continue
		}
		files = append(files, ledger.RepairedFile{Name: e.Name, Ino: e.Ino, Size: e.Size, Hash: spool.ContentHash(data),
			Message: m, ModTime: time.Unix(0, e.ModTime)})
		ids = append(ids, m.MsgID)
	}
	processed, err := c.l.ProcessedIDs(ctx, ids)
	if err != nil {
		return err
	}
	lost := files[:0]
	for _, f := range files {
		if !processed[f.Message.MsgID] {
			unrecorded.add("done/" + f.Name)
			lost = append(lost, f)
		}
	}
	if !c.repair || len(lost) == 0 {
		return nil
	}
	outcomes, err := c.l.RepairDone(ctx, lost, c.o.Consumer, c.now)
	if err != nil {
		return err
	}
	for i, f := range lost {
		c.o.Log(fmt.Sprintf("repaired done/%s: recorded as %s (msg_id %s)", f.Name, outcomes[i], f.Message.MsgID))
	}
	return nil
}

// errorStage compares error/ with the dead-letter records.
func (c *checker) errorStage(ctx context.Context) (*finding, error) {
	f := c.newFinding(ErrorUnrecorded, false)
	rows, err := report.Errors(ctx, c.d, c.l)
	if err != nil {
		return nil, err
	}
	var lost []ledger.RepairedFile
	for _, r := range rows {
		c.staged = stageKeys(c.staged, r.Ino, r.File)
		if r.Known {
			continue
		}
		f.add("error/" + r.File)
		lost = append(lost, ledger.RepairedFile{Name: r.File, Ino: r.Ino, Size: r.Size(), ModTime: r.ModTime()})
	}
	f.Text = fmt.Sprintf("%d files in error/ have no dead-letter record", f.Count)
	if c.repair && len(lost) > 0 {
		if err := c.l.RepairError(ctx, lost, c.o.Consumer, c.now); err != nil {
			return nil, err
		}
		for _, r := range lost {
			c.o.Log(fmt.Sprintf("repaired error/%s: recorded as a dead letter with reason %s", r.Name, report.ReasonUnknown))
		}
	}
	return f, nil
}

// processed reports the processed rows whose file is in no stage.
func (c *checker) processed(ctx context.Context) (*finding, error) {
	f := c.newFinding(ProcessedWithoutFile, true)
	for _, s := range []queue.Stage{queue.Inbox} {
		if err := c.d.List(s, func(e queue.Entry) error {
			c.staged = stageKeys(c.staged, e.Ino, e.Name)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	claims, err := c.d.ClaimFiles()
	if err != nil {
		return nil, err
	}
	for _, cl := range claims {
		c.staged = stageKeys(c.staged, cl.Ino, cl.Name)
	}
	slices.SortFunc(c.staged, compareKeys)
	err = c.l.EachProcessed(ctx, func(p ledger.ProcessedFile) error {
		if p.Ino == 0 {
			return nil // recorded before inodes were: cannot tell
		}
		if _, ok := slices.BinarySearchFunc(c.staged, recordedKey(p.Ino, p.File), compareKeys); !ok {
			f.add(p.File + " (msg_id " + p.MsgID + ")")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	f.Text = fmt.Sprintf("%d processed rows have no file in any stage (pruned or removed from done/; a redelivery is still a duplicate)", f.Count)
	return f, nil
}

// Package hold is the one way a queue is paused and resumed and its
// messages held aside and released (docs/DESIGN.md, "Pause and hold"): the
// command line (spool pause, resume, hold, release, holds) and the HTTP
// API (POST /api/v1/pause, /resume, /holds, /holds/release) only
// translate their input into a call of the Service and its answer into
// their output. The Service checks the role, moves the files, records
// them in the ledger and writes the audit.
//
// A pause is one row of the ledger (ledger.Holding.SetPause, with its audit
// row in the same transaction), which every consumer of the queue reads
// every second (spool.Ledger): they stop claiming and calling, finish
// what is under way, and go on once it is resumed. A held file is moved
// from inbox/ into the queue's held/ stage (queue.Dir.Hold), which no
// consumer scans, and then recorded (ledger.Holding.RecordHeldFile); a release
// forgets the record and then moves the file back into inbox/ under the
// name it had (queue.Dir.Unhold), so a record always names a file in
// held/, and a kill between the two leaves a held file without its
// record, still held and listed. A held msg_id is a ledger row; a
// consumer moves each delivery of it into held/ when it parses it, and
// records it there (ledger.DB.RecordHeld). Releasing a msg_id ends its
// hold and releases every file held under it.
package hold

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/task"
)

// ErrForbidden is wrapped by the Service's actions for an identity whose
// role is below task.RoleOperator: a viewer may read the holds, not
// change them. The refusal is audited.
var ErrForbidden = errors.New("forbidden")

// ErrBadRequest is wrapped for a request that names nothing, names a
// file that is not a message name, or a blank msg_id, or whose note is
// too long. The refusal is audited.
var ErrBadRequest = errors.New("bad request")

// MaxNote bounds a note, in bytes.
const MaxNote = 4096

// Service pauses, resumes, holds and releases, for one queue and its
// ledger. Its zero Contract is spool.DefaultContract: it reads the msg_id
// of a held file, and must be the queue's.
type Service struct {
	Dir      *queue.Dir
	Ledger   *ledger.DB
	Contract spool.Contract
	// Records is true for a queue of batch files (spool.conf's format),
	// whose records are messages of their own: a hold by msg_id is
	// refused there, since the consumer reads a record where its file is
	// and does not look its msg_id up (docs/DESIGN.md, "Batch files: the
	// consumer"); the file itself is held by its name.
	Records bool
	// Host and PID name this process in the audit's rows.
	Host string
	PID  int
}

// Change is what a Pause or Resume did.
type Change struct {
	// Before is the pause as it was; Changed is false when the queue was
	// paused (resumed) already, and nothing changed.
	Before  ledger.PauseState
	Changed bool
}

// Pause pauses the queue as who, with note: every consumer stops
// claiming and calling within about a second. A queue paused already
// stays paused by its first pauser (Changed false). It needs
// task.RoleOperator; every call is audited (action "pause").
func (s *Service) Pause(ctx context.Context, who task.Identity, note string) (Change, error) {
	return s.setPause(ctx, who, true, note)
}

// Resume resumes the queue as who: its consumers go on. A queue not
// paused is left so (Changed false). It needs task.RoleOperator; every
// call is audited (action "resume").
func (s *Service) Resume(ctx context.Context, who task.Identity, note string) (Change, error) {
	return s.setPause(ctx, who, false, note)
}

func (s *Service) setPause(ctx context.Context, who task.Identity, paused bool, note string) (Change, error) {
	action := "resume"
	if paused {
		action = "pause"
	}
	e, err := s.entry(who, action, map[string]any{"note": note})
	if err != nil {
		return Change{}, err
	}
	if err := s.admit(ctx, who, e, Request{Note: note}, false); err != nil {
		return Change{}, err
	}
	before, changed, err := s.Ledger.Holding().SetPause(ctx, paused, holder(who, note), e)
	if err != nil {
		return Change{}, fmt.Errorf("%s: %w", action, err)
	}
	return Change{Before: before, Changed: changed}, nil
}

// Request names what to hold or release: files by name (in inbox/ for a
// hold; in held/, or the name it had in inbox/, for a release) and
// msg_ids, with a note (a hold's).
type Request struct {
	Files  []string `json:"files,omitempty"`
	MsgIDs []string `json:"msg_ids,omitempty"`
	Note   string   `json:"note,omitempty"`
}

// Item is what became of one name or msg_id of a Request.
type Item struct {
	// File or MsgID is what was asked.
	File  string `json:"file,omitempty"`
	MsgID string `json:"msg_id,omitempty"`
	// Done says it was held (released); Why says why not, when not.
	Done bool   `json:"done"`
	Why  string `json:"why,omitempty"`
	// Name is the file's name in held/ after a hold, in inbox/ after a
	// release.
	Name string `json:"name,omitempty"`
	// Processed, for a msg_id held, is when the ledger processed it
	// already: the hold holds its later deliveries.
	Processed *time.Time `json:"processed_at,omitempty"`
	// Released are the files a msg_id's release put back into inbox/,
	// each as File (its name in held/) and Name (in inbox/).
	Released []Item `json:"released,omitempty"`
}

// Result is what a Hold or Release did, item by item in the request's
// order: the files, then the msg_ids.
type Result struct {
	Items []Item `json:"items"`
	// Done counts the items done, Missing those not.
	Done    int `json:"done"`
	Missing int `json:"missing"`
}

func (r *Result) add(it Item) {
	r.Items = append(r.Items, it)
	if it.Done {
		r.Done++
	} else {
		r.Missing++
	}
}

// Hold holds r's files and msg_ids as who, with r's note. Each file is
// moved from inbox/ into held/ and recorded; one no longer in inbox/ (a
// consumer claimed it first, or it never was there) is an item not done.
// Each msg_id is held from now on: within about a second no consumer
// processes a delivery of it, but moves it into held/; one processed
// already says when (its later deliveries are held). It needs
// task.RoleOperator; it is audited (action "hold"), begun before the
// first move and ended with the counts.
func (s *Service) Hold(ctx context.Context, who task.Identity, r Request) (Result, error) {
	e, err := s.entry(who, "hold", r)
	if err != nil {
		return Result{}, err
	}
	if err := s.admit(ctx, who, e, r, true); err != nil {
		return Result{}, err
	}
	var res Result
	return res, s.audited(ctx, e, &res, func() error {
		h := holder(who, r.Note)
		for _, name := range r.Files {
			it, err := s.holdFile(ctx, name, h)
			if err != nil {
				return err
			}
			res.add(it)
		}
		if len(r.MsgIDs) == 0 {
			return nil
		}
		added, err := s.Ledger.Holding().HoldMsgIDs(ctx, r.MsgIDs, h)
		if err != nil {
			return err
		}
		for _, id := range r.MsgIDs {
			it := Item{MsgID: id, Done: slices.Contains(added, id)}
			if !it.Done {
				it.Why = HeldAlready
			}
			st, err := s.Ledger.Messages().Story(ctx, id, "")
			if err != nil {
				return err
			}
			if st.Processed != nil {
				at := st.Processed.ProcessedAt.UTC()
				it.Processed = &at
			}
			res.add(it)
		}
		return nil
	})
}

// holdFile moves inbox/name into held/ and records it.
func (s *Service) holdFile(ctx context.Context, name string, h ledger.Holder) (Item, error) {
	hf, err := s.Dir.Hold(name)
	switch {
	case errors.Is(err, queue.ErrNotInInbox):
		return Item{File: name, Why: "not in inbox/: claimed by a consumer already, or never there (spool show DIR " + name + " tells where it is)"}, nil
	case errors.Is(err, queue.ErrNotAnnounced):
		return Item{File: name, Why: "not announced yet: its done-file is not in inbox/, and its producer may still be writing it"}, nil
	case err != nil:
		return Item{}, err
	}
	f := ledger.HeldFile{File: hf.Name, Ino: hf.Ino, Origin: name, Cause: ledger.HeldByFile, Holder: h}
	f.MsgID, _ = s.keyOf(hf.Name)
	if _, err := s.Ledger.Holding().RecordHeldFile(ctx, f); err != nil {
		return Item{}, fmt.Errorf("%w (held/%s is held, without its record)", err, hf.Name)
	}
	return Item{File: name, Done: true, Name: hf.Name}, nil
}

// Release releases r's files and msg_ids as who. A file (its name in
// held/, or the name it had in inbox/ when one held file had it) goes
// back into inbox/ under the name it had there (suffixed on a
// collision); one whose msg_id is still held is refused (release the
// msg_id instead). A msg_id's hold ends, and every file held under it
// goes back. It needs task.RoleOperator; it is audited (action
// "release").
func (s *Service) Release(ctx context.Context, who task.Identity, r Request) (Result, error) {
	e, err := s.entry(who, "release", r)
	if err != nil {
		return Result{}, err
	}
	if err := s.admit(ctx, who, e, r, false); err != nil {
		return Result{}, err
	}
	var res Result
	return res, s.audited(ctx, e, &res, func() error {
		held, err := s.Ledger.Holding().HeldIDs(ctx)
		if err != nil {
			return err
		}
		heldIDs := map[string]bool{}
		for _, h := range held {
			heldIDs[h.MsgID] = true
		}
		files, err := s.Files(ctx)
		if err != nil {
			return err
		}
		for _, name := range r.Files {
			it, err := s.releaseFile(ctx, name, files, heldIDs)
			if err != nil {
				return err
			}
			res.add(it)
		}
		if len(r.MsgIDs) == 0 {
			return nil
		}
		// The holds first: from then on no consumer sets a delivery of
		// them aside (one doing it now records it before this commits,
		// and is listed below, or puts it back itself).
		removed, err := s.Ledger.Holding().ReleaseMsgIDs(ctx, r.MsgIDs)
		if err != nil {
			return err
		}
		if files, err = s.Files(ctx); err != nil {
			return err
		}
		for _, id := range r.MsgIDs {
			it := Item{MsgID: id, Done: slices.Contains(removed, id)}
			for _, f := range files {
				if f.MsgID != id {
					continue
				}
				back, err := s.release(ctx, f)
				if err != nil {
					return err
				}
				it.Released = append(it.Released, back)
				it.Done = it.Done || back.Done
			}
			if !it.Done {
				it.Why = "not held"
			}
			res.add(it)
		}
		return nil
	})
}

// releaseFile releases the held file name, one of files, unless its
// msg_id is held.
func (s *Service) releaseFile(ctx context.Context, name string, files []File, heldIDs map[string]bool) (Item, error) {
	var match []File
	for _, f := range files {
		if f.Name == name {
			match = []File{f}
			break
		}
		if f.Record != nil && f.Record.Origin == name {
			match = append(match, f)
		}
	}
	switch {
	case len(match) == 0:
		return Item{File: name, Why: "not in held/"}, nil
	case len(match) > 1:
		return Item{File: name, Why: fmt.Sprintf("%d held files had that name in inbox/: name one by its name in held/ (spool holds DIR)", len(match))}, nil
	}
	f := match[0]
	if f.MsgID != "" && heldIDs[f.MsgID] {
		return Item{File: name, Why: fmt.Sprintf("its msg_id %s is held: spool release DIR --msg-id %s releases it and every file of it", f.MsgID, f.MsgID)}, nil
	}
	it, err := s.release(ctx, f)
	it.File = name
	return it, err
}

// release forgets f's record, then moves it back into inbox/: a kill
// between the two leaves it held, without its record.
func (s *Service) release(ctx context.Context, f File) (Item, error) {
	if f.Record != nil {
		if err := s.Ledger.Holding().ForgetHeldFiles(ctx, []int64{f.Record.ID}); err != nil {
			return Item{}, err
		}
	}
	as := f.Name
	if f.Record != nil && f.Record.Origin != "" {
		as = f.Record.Origin
	}
	name, err := s.Dir.Unhold(f.Name, as)
	if errors.Is(err, queue.ErrNotHeld) {
		return Item{File: f.Name, Why: "not in held/ (released meanwhile)"}, nil
	}
	if err != nil {
		return Item{}, err
	}
	return Item{File: f.Name, Done: true, Name: name}, nil
}

// File is a file in held/ with its record, if it has one.
type File struct {
	Name    string
	Ino     uint64
	Size    int64
	ModTime time.Time
	// MsgID is the record's, or read from the file when it has none
	// (empty when neither says).
	MsgID string
	// Record is nil for a file without one: held by a hold killed before
	// it recorded it, or put there by hand. It is held all the same.
	Record *ledger.HeldFile
}

// Files lists the files in held/, in name order, each with its record.
func (s *Service) Files(ctx context.Context) ([]File, error) {
	recs, err := s.Ledger.Holding().HeldFiles(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]*ledger.HeldFile{}
	for i := range recs {
		byName[recs[i].File] = &recs[i]
	}
	var out []File
	err = s.Dir.List(queue.Held, func(e queue.Entry) error {
		f := File{Name: e.Name, Ino: e.Ino, Size: e.Size, ModTime: time.Unix(0, e.ModTime)}
		if r := byName[e.Name]; r != nil && (r.Ino == 0 || r.Ino == e.Ino) {
			f.Record, f.MsgID = r, r.MsgID
		}
		if f.MsgID == "" {
			f.MsgID, _ = s.keyOf(e.Name)
		}
		out = append(out, f)
		return ctx.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list held files: %w", err)
	}
	return out, nil
}

// State is what an operator holds back from the queue.
type State struct {
	Pause  ledger.PauseState
	MsgIDs []ledger.HeldID
	Files  []File
	// Stale are the records whose file is gone from held/ (removed by
	// hand: spool fsck reports them).
	Stale []ledger.HeldFile
}

// State reads the queue's pause, its held msg_ids and the files in
// held/.
func (s *Service) State(ctx context.Context) (State, error) {
	p, err := s.Ledger.Holding().PauseState(ctx)
	if err != nil {
		return State{}, err
	}
	ids, err := s.Ledger.Holding().HeldIDs(ctx)
	if err != nil {
		return State{}, err
	}
	files, err := s.Files(ctx)
	if err != nil {
		return State{}, err
	}
	recs, err := s.Ledger.Holding().HeldFiles(ctx)
	if err != nil {
		return State{}, err
	}
	st := State{Pause: p, MsgIDs: ids, Files: files}
	for _, r := range recs {
		if !slices.ContainsFunc(files, func(f File) bool { return f.Record != nil && f.Record.ID == r.ID }) {
			st.Stale = append(st.Stale, r)
		}
	}
	return st, nil
}

// keyOf reads the msg_id of held/name under the contract, "" when it has
// none that is valid.
func (s *Service) keyOf(name string) (string, bool) {
	c := s.Contract
	if c.KeyField == "" {
		c = spool.DefaultContract()
	}
	data, err := s.Dir.ReadHeld(name, c.Limit())
	if err != nil {
		return "", false
	}
	return c.KeyOf(data)
}

// admit checks who's role and the request, and audits a refusal.
func (s *Service) admit(ctx context.Context, who task.Identity, e ledger.AuditEntry, r Request, needsNames bool) error {
	var refusal error
	switch {
	case who.Role < task.RoleOperator:
		refusal = fmt.Errorf("%w: role %s may not %s: it needs %s", ErrForbidden, who.Role, e.Action, task.RoleOperator)
	case len(r.Note) > MaxNote:
		refusal = fmt.Errorf("%w: the note is %d bytes, over %d", ErrBadRequest, len(r.Note), MaxNote)
	case e.Action == "hold" || e.Action == "release":
		refusal = s.checkRequest(r)
	}
	if refusal == nil && e.Action == "hold" && s.Records && len(r.MsgIDs) > 0 {
		refusal = fmt.Errorf("%w: this queue reads batch files, whose records are not held by msg_id: hold the file that holds it, by its name", ErrBadRequest)
	}
	if refusal == nil {
		return nil
	}
	if _, err := s.Ledger.Audit().Record(ctx, e, ledger.AuditRefused, nil, refusal.Error()); err != nil {
		return errors.Join(refusal, err)
	}
	return refusal
}

// checkRequest refuses a request that names nothing or a bad name: a
// file must be a message name of the queue (its format's, for batch
// files).
func (s *Service) checkRequest(r Request) error {
	if len(r.Files) == 0 && len(r.MsgIDs) == 0 {
		return fmt.Errorf("%w: name files or msg_ids", ErrBadRequest)
	}
	for _, f := range r.Files {
		if err := queue.CheckName(f); err != nil {
			return fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		if !s.Dir.Takes(f) {
			return fmt.Errorf("%w: %q: %w", ErrBadRequest, f, queue.ErrNotMessageName)
		}
	}
	for _, id := range r.MsgIDs {
		if strings.TrimSpace(id) == "" || len(id) > spool.MaxKeyLen {
			return fmt.Errorf("%w: msg_id %q: want a key of 1 to %d bytes", ErrBadRequest, id, spool.MaxKeyLen)
		}
	}
	return nil
}

// audited runs do between its audit row's begin and end: nothing is
// moved unaudited, and the row ends with res's counts, ok when something
// was done, refused when nothing could be, failed with do's error.
func (s *Service) audited(ctx context.Context, e ledger.AuditEntry, res *Result, do func() error) error {
	id, err := s.Ledger.Audit().Begin(ctx, e)
	if err != nil {
		return err
	}
	err = do()
	outcome, detail := ledger.AuditOK, ""
	switch {
	case err != nil:
		outcome, detail = ledger.AuditFailed, err.Error()
	case res.Done == 0:
		outcome = ledger.AuditRefused
		var why []string
		for _, it := range res.Items {
			why = append(why, cmpOr(it.File, it.MsgID)+": "+it.Why)
		}
		detail = strings.Join(why, "; ")
	}
	counts := ledger.AuditCounts{"asked": int64(len(res.Items)), "done": int64(res.Done), "missing": int64(res.Missing)}
	if aerr := s.Ledger.Audit().End(context.WithoutCancel(ctx), id, outcome, counts, detail); aerr != nil {
		return errors.Join(err, aerr)
	}
	return err
}

// entry is the audit entry of who's action on selection.
func (s *Service) entry(who task.Identity, action string, selection any) (ledger.AuditEntry, error) {
	return who.AuditEntry(action, selection, s.Host, s.PID)
}

// holder is who as the ledger's hold records name them.
func holder(who task.Identity, note string) ledger.Holder {
	h := ledger.Holder{By: who.Name, Via: who.Via, Note: note}
	if who.Via != ledger.AuditCLI {
		h.Role = who.Role.String()
	}
	return h
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

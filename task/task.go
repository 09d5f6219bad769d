package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// Task states (ledger.TaskStates).
const (
	StateWaiting   = ledger.TaskWaiting
	StateApproved  = ledger.TaskApproved
	StateRunning   = ledger.TaskRunning
	StateDone      = ledger.TaskDone
	StateCancelled = ledger.TaskCancelled
	StateFailed    = ledger.TaskFailed
)

// Errors of the Service. Each refusal is audited before it is returned.
var (
	// ErrNotFound: no task has that id (wraps ledger.ErrTaskNotFound).
	ErrNotFound = ledger.ErrTaskNotFound
	// ErrForbidden: the identity's role may not do that.
	ErrForbidden = errors.New("role may not do that")
	// ErrOwnRequest: an approval by the one who asked.
	ErrOwnRequest = errors.New("a request needs someone else's approval")
	// ErrState: the task is not in a state the action starts from (an
	// approval of a task not waiting, a cancel of a finished one, a run of
	// one waiting).
	ErrState = ledger.ErrTaskState
	// ErrStale is wrapped by *StaleError.
	ErrStale = errors.New("files changed since the request")
	// ErrNothing: the selection matched no dead letter (or only ones a
	// replay skips); no task is recorded.
	ErrNothing = errors.New("nothing selected")
	// ErrDigest: an approval names another digest than the task's set
	// has: it was given for another request. Any change of what is asked
	// is a new request, with a digest of its own.
	ErrDigest = errors.New("the approval names another set than the task's")
)

// StaleError refuses an approval whose file set changed since the
// request: each file of Changed (with ChangedWhy) was replayed, discarded,
// fixed or replaced meanwhile. Nothing was approved or moved.
type StaleError struct {
	Task    int64
	Files   int
	Changed []ledger.TaskFile
}

func (e *StaleError) Error() string {
	s := fmt.Sprintf("task %d: %d of its %d files changed since the request", e.Task, len(e.Changed), e.Files)
	for i, f := range e.Changed {
		if i == 3 {
			s += fmt.Sprintf(", and %d more", len(e.Changed)-3)
			break
		}
		s += fmt.Sprintf("; %s: %s", f.File, f.ChangedWhy)
	}
	return s + ": ask again to see the queue as it is now"
}

// Unwrap makes a *StaleError match ErrStale.
func (e *StaleError) Unwrap() error { return ErrStale }

// Task is a task as the Service shows it (JSON for the HTTP API).
type Task struct {
	ID      int64   `json:"id"`
	Kind    Kind    `json:"kind"`
	State   string  `json:"state"`
	Request Request `json:"request"`
	// Files is the size of the set, Digest its hash (Preview.Digest),
	// Skipped the selected files left out (processed already).
	Files   int    `json:"files"`
	Digest  string `json:"digest"`
	Skipped int    `json:"skipped"`
	// By, Role and Via are who asked (Role "" on the command line); By
	// names its realm (os:alice, token:olga), ByOS is the OS user the
	// requester is, when known (SamePerson).
	By      string    `json:"by"`
	ByOS    string    `json:"by_os,omitempty"`
	Role    string    `json:"role,omitempty"`
	Via     string    `json:"via"`
	Created time.Time `json:"created"`
	// ApprovedBy is "" for a task that needed no approval.
	ApprovedBy string    `json:"approved_by,omitempty"`
	Approved   time.Time `json:"approved,omitzero"`
	EndedBy    string    `json:"ended_by,omitempty"`
	Ended      time.Time `json:"ended,omitzero"`
	// Progress: files of the set in chunks begun (Next), and of finished
	// chunks those moved (Done), found gone (Missing), found changed and
	// left (Changed).
	Next    int       `json:"next"`
	Done    int       `json:"done"`
	Missing int       `json:"missing"`
	Changed int       `json:"changed"`
	Detail  string    `json:"detail,omitempty"`
	Updated time.Time `json:"updated"`
}

// fromRecord is the Task of a ledger record.
func fromRecord(r ledger.TaskRecord) (Task, error) {
	t := Task{ID: r.ID, Kind: Kind(r.Kind), State: r.State, Files: r.Files, Digest: r.Digest, Skipped: r.Skipped,
		By: r.By, ByOS: r.ByOS, Role: r.Role, Via: r.Via, Created: r.Created, ApprovedBy: r.ApprovedBy, Approved: r.Approved,
		EndedBy: r.EndedBy, Ended: r.Ended, Next: r.Next, Done: r.Done, Missing: r.Missing, Changed: r.Changed,
		Detail: r.Detail, Updated: r.Updated}
	if err := json.Unmarshal([]byte(r.Request), &t.Request); err != nil {
		return t, fmt.Errorf("task %d: request: %w", r.ID, err)
	}
	return t, nil
}

// Service runs the tasks of one queue and its ledger. Its fields are set
// once, before the first call; a Service may be used by several
// goroutines, and several processes may run Services on one queue.
type Service struct {
	// Dir and Ledger are the queue and its ledger, opened for writing.
	Dir    *queue.Dir
	Ledger *ledger.DB
	// Contract is the queue's contract, with which a file's msg_id and
	// ordering key are read.
	Contract spool.Contract
	// Policy is the approval policy while the ledger holds none
	// (NoPolicy for none). Once it holds one (QueuePolicy, SetPolicy),
	// the ledger's is read at each request instead, so that a change
	// applies to a Service that runs for months.
	Policy Policy
	// Host and PID are the process, for the audit rows
	// (ledger.AuditEntry).
	Host string
	PID  int
}

// Get returns task id, or an error wrapping ErrNotFound.
func (s *Service) Get(ctx context.Context, id int64) (Task, error) {
	r, err := s.Ledger.Tasks().Get(ctx, id)
	if err != nil {
		return Task{}, err
	}
	return fromRecord(r)
}

// List returns the tasks q selects, newest first.
func (s *Service) List(ctx context.Context, q ledger.TaskQuery) ([]Task, error) {
	rs, err := s.Ledger.Tasks().List(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]Task, 0, len(rs))
	for _, r := range rs {
		t, err := fromRecord(r)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// File is a file of a task's set as the API and spool tasks --json show
// it: its index in the set, its name and inode in error/ when the task
// was asked, the SHA-256 of its body ("" for one not regular or not
// readable) and its size, its msg_id and reason when known, and why it
// was found changed when its chunk came (and so not moved).
type File struct {
	Idx     int    `json:"idx"`
	File    string `json:"file"`
	Ino     uint64 `json:"ino"`
	SHA256  string `json:"sha256"`
	Size    int64  `json:"size"`
	MsgID   string `json:"msg_id,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Changed string `json:"changed,omitempty"`
}

// FilePage is a page of a task's files: Items from Offset on, of Total;
// Next is the offset of the next page, nil after the last.
type FilePage struct {
	Items  []File `json:"items"`
	Offset int    `json:"offset"`
	Total  int    `json:"total"`
	Next   *int   `json:"next"`
}

// Page returns the files of task t's set from offset, at most limit of
// them (limit <= 0 for all): what an approver pages through.
func (s *Service) Page(ctx context.Context, t Task, offset, limit int) (FilePage, error) {
	offset = max(0, offset)
	to := 0
	if limit > 0 {
		to = offset + limit
	}
	fs, err := s.Ledger.Tasks().Files(ctx, t.ID, offset, to)
	if err != nil {
		return FilePage{}, err
	}
	p := FilePage{Items: make([]File, len(fs)), Offset: offset, Total: t.Files}
	for i, f := range fs {
		p.Items[i] = File{Idx: f.Idx, File: f.File, Ino: f.Ino, SHA256: f.ContentHash, Size: f.Size, MsgID: f.MsgID, Reason: f.Reason, Changed: f.ChangedWhy}
	}
	if next := offset + len(fs); limit > 0 && next < t.Files {
		p.Next = &next
	}
	return p, nil
}

// roleName names r for a message.
func roleName(r Role) string {
	if r == RoleNone {
		return "no role"
	}
	return r.String()
}

// View is a task as an approver is shown it: the task (what was asked,
// its options, who asked and why, the digest of its set) with the first
// page of its files (FileList).
type View struct {
	Task
	FileList FilePage `json:"file_list"`
}

// View returns task id with its first limit files (limit <= 0 for all).
func (s *Service) View(ctx context.Context, id int64, limit int) (View, error) {
	t, err := s.Get(ctx, id)
	if err != nil {
		return View{Task: t}, err
	}
	p, err := s.Page(ctx, t, 0, limit)
	return View{Task: t, FileList: p}, err
}

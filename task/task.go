package task

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/replay"
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

// NeedsApproval reports whether the task was asked under a policy that
// made it wait for an approval.
func (t Task) NeedsApproval() bool { return t.State == StateWaiting || t.ApprovedBy != "" }

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

// Preview is a request resolved against the queue now: the file set a
// task would be created with. It is what a dry run shows.
type Preview struct {
	Kind Kind `json:"kind"`
	// Files is the set, in its order, each with its name, inode, body hash
	// and size, msg_id and reason.
	Files []ledger.TaskFile `json:"-"`
	// Count is len(Files); Skipped the selected files left out (a
	// replay's messages processed already, unless Force).
	Count   int `json:"count"`
	Skipped int `json:"skipped"`
	// Digest is the hex SHA-256 of the kind and each file's name, inode
	// and body hash, in order: two resolutions with the same digest move
	// the same files with the same bodies.
	Digest string `json:"digest"`
	// NeedsApproval reports that the policy makes a task of this set wait
	// for an approval.
	NeedsApproval bool `json:"needs_approval"`
	// policy is the policy NeedsApproval was judged by.
	policy Policy
}

// Preview resolves req against error/ and the ledger as Create would, and
// records nothing: the dry run, with the count. It fails wrapping
// ErrBadRequest for a bad request, queue.ErrNotInError for a name not in
// error/. It needs no role: the caller checks that who asks may read.
func (s *Service) Preview(ctx context.Context, req Request) (Preview, error) {
	if err := req.Check(); err != nil {
		return Preview{}, err
	}
	return s.resolve(ctx, req)
}

// resolve resolves req under the replay lock.
func (s *Service) resolve(ctx context.Context, req Request) (_ Preview, err error) {
	unlock, _, err := replay.Lock(ctx, s.Dir, s.Ledger)
	if err != nil {
		return Preview{}, err
	}
	defer func() {
		if uerr := unlock(); err == nil && uerr != nil {
			err = uerr
		}
	}()
	plan, err := replay.ResolveWhere(ctx, s.Dir, s.Ledger, s.Contract, req.Selection.base(), req.Force || req.Kind == Discard, req.Selection.keep())
	if err != nil {
		return Preview{}, err
	}
	p := Preview{Kind: req.Kind}
	for _, st := range plan.Steps {
		if st.Skip {
			p.Skipped++
			continue
		}
		hash, size, err := s.Dir.HashFile(queue.Error, st.File, st.Ino)
		if err != nil {
			return Preview{}, fmt.Errorf("resolve %s: %w", st.File, err)
		}
		msgID := st.MessageKey()
		p.Files = append(p.Files, ledger.TaskFile{Idx: len(p.Files), File: st.File, Ino: st.Ino, ContentHash: hash, Size: size, MsgID: msgID, Reason: st.Reason})
	}
	p.Count = len(p.Files)
	p.Digest = digest(req.Kind, p.Files)
	if p.policy, err = s.policy(ctx); err != nil {
		return Preview{}, err
	}
	p.NeedsApproval = p.policy.Needs(req.Kind, p.Count)
	return p, nil
}

// digest is Preview.Digest of files.
func digest(kind Kind, files []ledger.TaskFile) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", kind)
	for _, f := range files {
		fmt.Fprintf(h, "%d\x00%s\x00%d\x00%s\n", f.Idx, f.File, f.Ino, f.ContentHash)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Create resolves req (as Preview) and records the task with its file
// set, asked by who: in StateWaiting when the policy needs an approval
// for it, else StateApproved, for Run. It returns the task and the
// preview it was created from. who needs RoleOperator (else ErrForbidden,
// audited); a selection that matches nothing fails with ErrNothing and
// records nothing. The request is audited (action the kind, with the
// task's id) in the same call.
func (s *Service) Create(ctx context.Context, who Identity, req Request) (Task, Preview, error) {
	if who.Role < RoleOperator {
		err := fmt.Errorf("%s as %s may not ask for a %s: operator needed: %w", who.Name, roleName(who.Role), req.Kind, ErrForbidden)
		return Task{}, Preview{}, s.refuse(ctx, who, string(req.Kind), 0, requestSelection(req, nil), err)
	}
	if err := req.Check(); err != nil {
		return Task{}, Preview{}, err
	}
	p, err := s.resolve(ctx, req)
	if err != nil {
		return Task{}, p, err
	}
	if p.Count == 0 {
		return Task{}, p, ErrNothing
	}
	text, err := json.Marshal(req)
	if err != nil {
		return Task{}, p, fmt.Errorf("create task: %w", err)
	}
	now := time.Now()
	rec := ledger.TaskRecord{Kind: string(req.Kind), State: StateApproved, Request: string(text), Files: p.Count,
		Digest: p.Digest, Skipped: p.Skipped, By: who.Name, ByOS: who.OS, Role: who.auditRole(), Via: who.Via, Note: req.Note, Created: now}
	detail := "approved: no approval needed"
	if p.NeedsApproval {
		rec.State = StateWaiting
		detail = fmt.Sprintf("waits for approval: %d files, over %s_over %d", p.Count, req.Kind, p.policy.over(req.Kind))
	}
	id, err := s.Ledger.CreateTask(ctx, rec, p.Files)
	if err != nil {
		return Task{}, p, err
	}
	entry := s.entry(who, string(req.Kind), id, requestSelection(req, &p))
	counts := ledger.AuditCounts{"selected": int64(p.Count), "skipped": int64(p.Skipped)}
	if _, err := s.Ledger.AuditRecord(ctx, entry, ledger.AuditOK, counts, fmt.Sprintf("task %d %s", id, detail)); err != nil {
		// Not left to run unaudited.
		_ = s.Ledger.MoveTask(context.WithoutCancel(ctx), id, ledger.TaskTransition{From: []string{StateWaiting, StateApproved},
			To: StateCancelled, By: who.Name, Detail: "its request could not be audited"})
		return Task{}, p, fmt.Errorf("task %d: %w (cancelled: a task is not run unaudited)", id, err)
	}
	t, err := s.Get(ctx, id)
	return t, p, err
}

// over is the policy's limit for kind.
func (p Policy) over(kind Kind) int {
	if kind == Discard {
		return p.DiscardOver
	}
	return p.ReplayOver
}

// Get returns task id, or an error wrapping ErrNotFound.
func (s *Service) Get(ctx context.Context, id int64) (Task, error) {
	r, err := s.Ledger.Task(ctx, id)
	if err != nil {
		return Task{}, err
	}
	return fromRecord(r)
}

// List returns the tasks q selects, newest first.
func (s *Service) List(ctx context.Context, q ledger.TaskQuery) ([]Task, error) {
	rs, err := s.Ledger.Tasks(ctx, q)
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

// Files returns the files of task id's set with from <= Idx < to (to <= 0
// for all from from), in order, each with why it was found changed if it
// was.
func (s *Service) Files(ctx context.Context, id int64, from, to int) ([]ledger.TaskFile, error) {
	return s.Ledger.TaskFiles(ctx, id, from, to)
}

// roleName names r for a message.
func roleName(r Role) string {
	if r == RoleNone {
		return "no role"
	}
	return r.String()
}

// requestSelection is the audit's selection of a request: what was
// asked, and (p not nil) what it resolved to.
func requestSelection(req Request, p *Preview) map[string]any {
	sel := map[string]any{}
	b, _ := json.Marshal(req.Selection) // plain data always marshals
	_ = json.Unmarshal(b, &sel)
	if req.Note != "" {
		sel["note"] = req.Note
	}
	if req.Force {
		sel["force"] = true
	}
	if req.To != "" {
		sel["to"] = req.To
	}
	if req.Rate > 0 {
		sel["rate"] = req.Rate
	}
	if p != nil {
		sel["files"], sel["digest"] = p.Count, p.Digest
	}
	return sel
}

// entry is the audit entry of an action of who on task (0 for none).
func (s *Service) entry(who Identity, action string, task int64, sel map[string]any) ledger.AuditEntry {
	text := "{}"
	if sel != nil {
		b, _ := json.Marshal(sel) // maps of plain data always marshal
		text = string(b)
	}
	name := who.Name
	if name == "" {
		name = "(anonymous)"
	}
	via := who.Via
	if via == "" {
		via = ledger.AuditCLI
	}
	return ledger.AuditEntry{Actor: name, Role: who.auditRole(), Via: via, Action: action, Selection: text, Host: s.Host, PID: s.PID, Task: task}
}

// refuse audits a refusal of action and returns err (joined with the
// audit's failure if it could not be written).
func (s *Service) refuse(ctx context.Context, who Identity, action string, task int64, sel map[string]any, err error) error {
	return s.refuseCounts(ctx, who, action, task, sel, nil, err)
}

func (s *Service) refuseCounts(ctx context.Context, who Identity, action string, task int64, sel map[string]any, counts ledger.AuditCounts, err error) error {
	if _, aerr := s.Ledger.AuditRecord(context.WithoutCancel(ctx), s.entry(who, action, task, sel), ledger.AuditRefused, counts, err.Error()); aerr != nil {
		return errors.Join(err, fmt.Errorf("audit %s: %w", action, aerr))
	}
	return err
}

package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/task"
)

// runs are the task runs the server started: an approved task runs in the
// background, as the identity that approved it (or asked for it, when it
// needed no approval), until it is done, cancelled or the server stops
// (Close); a run stopped then stays running in the ledger, and the next
// server, or spool tasks' run, resumes it from its cursor.
type runs struct {
	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	running map[int64]bool
}

// Start resumes the tasks approved or running in the ledger (a server
// stopped or killed during a run) and makes the runs of this server
// children of ctx, and starts the charts' sampler (series.go). Call it
// once before serving.
func (s *Server) Start(ctx context.Context) error {
	s.runs.mu.Lock()
	s.runs.ctx, s.runs.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.runs.running = map[int64]bool{}
	s.runs.mu.Unlock()
	s.startSampler(ctx)
	ts, err := s.o.Tasks.List(ctx, ledger.TaskQuery{States: []string{task.StateApproved, task.StateRunning}})
	if err != nil {
		return fmt.Errorf("console: resume tasks: %w", err)
	}
	for _, t := range ts {
		who := task.Identity{Name: cmpOr(t.ApprovedBy, t.By), Role: task.RoleOperator, Via: ledger.AuditHTTP}
		s.run(who, t.ID)
	}
	return nil
}

// Close stops the runs (each after the chunk under way) and waits for
// them, stops the charts' sampler, and writes the refusals folded so far (refusals.go).
func (s *Server) Close() {
	s.runs.mu.Lock()
	if s.runs.cancel != nil {
		s.runs.cancel()
	}
	s.runs.mu.Unlock()
	s.runs.wg.Wait()
	s.stopSampler()
	s.folds.close()
}

// run runs task id as who in the background, unless it runs already.
func (s *Server) run(who task.Identity, id int64) {
	rs := &s.runs
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.ctx == nil || rs.ctx.Err() != nil || rs.running[id] {
		return
	}
	rs.running[id] = true
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		t, err := s.o.Tasks.Run(rs.ctx, who, id, task.RunOptions{})
		switch {
		case err != nil && rs.ctx.Err() != nil:
			s.o.Log.Info("task run stopped with the server; the next run resumes it", "task", id)
		case err != nil:
			s.o.Log.Error("task run", "task", id, "err", err)
		default:
			s.o.Log.Info("task run ended", "task", id, "state", t.State, "done", t.Done, "missing", t.Missing, "changed", t.Changed)
		}
		rs.mu.Lock()
		delete(rs.running, id)
		rs.mu.Unlock()
	}()
}

// taskError answers err of the task service: its refusals are audited
// by the service already.
func (s *Server) taskError(r *request, err error) (int, any) {
	var stale *task.StaleError
	switch {
	case errors.As(err, &stale):
		files := make([]map[string]any, 0, len(stale.Changed))
		for _, f := range stale.Changed {
			files = append(files, map[string]any{"file": f.File, "why": f.ChangedWhy})
		}
		return http.StatusConflict, map[string]any{"error": err.Error(), "changed": files}
	case errors.Is(err, task.ErrBadRequest), errors.Is(err, queue.ErrNotInError):
		return http.StatusBadRequest, apiError("%v", err)
	case errors.Is(err, task.ErrForbidden), errors.Is(err, task.ErrOwnRequest):
		return http.StatusForbidden, apiError("%v", err)
	case errors.Is(err, task.ErrNotFound):
		return http.StatusNotFound, apiError("%v", err)
	case errors.Is(err, task.ErrState), errors.Is(err, task.ErrDigest):
		return http.StatusConflict, apiError("%v", err)
	case errors.Is(err, task.ErrNothing):
		return http.StatusUnprocessableEntity, apiError("%v", err)
	}
	return s.failed(r, err)
}

// actionBody is the body of POST replays and POST discards: the selection
// at the top ({"reason": "parse"}, {"names": [...]}, {"all": true} with
// the filters since, until, detail_match, msg_id, order_no) or under
// "selection", and the request's options.
type actionBody struct {
	task.Selection
	Nested *task.Selection `json:"selection"`
	DryRun bool            `json:"dry_run"`
	Note   string          `json:"note"`
	Force  bool            `json:"force"`
	To     string          `json:"to"`
	Rate   float64         `json:"rate"`
}

func (s *Server) postReplay(r *request) (int, any)  { return s.ask(r, task.Replay) }
func (s *Server) postDiscard(r *request) (int, any) { return s.ask(r, task.Discard) }

// ask creates a task of kind from r's body, or with dry_run previews it.
func (s *Server) ask(r *request, kind task.Kind) (int, any) {
	var b actionBody
	dec := json.NewDecoder(http.MaxBytesReader(r.w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		// Not a request the service could judge: refused, with the
		// client's address, by the HTTP layer (refusals.go).
		return r.refusal(http.StatusBadRequest, apiError("body: %v (want a JSON selection object)", err))
	}
	sel := b.Selection
	if b.Nested != nil {
		sel = *b.Nested
	}
	req := task.Request{Kind: kind, Selection: sel, Note: b.Note, Force: b.Force, To: b.To, Rate: b.Rate}
	if b.DryRun {
		if err := req.Check(); err != nil {
			return r.refusal(http.StatusBadRequest, apiError("%v", err))
		}
		p, err := s.o.Tasks.Preview(r.Context(), req)
		if err != nil {
			return r.refusal(s.taskError(r, err)) // a preview audits nothing itself
		}
		return http.StatusOK, map[string]any{"dry_run": true, "kind": p.Kind, "count": p.Count, "skipped": p.Skipped,
			"pending": len(p.Pending), "digest": p.Digest, "needs_approval": p.NeedsApproval}
	}
	t, _, err := s.o.Tasks.Create(r.Context(), r.id, req)
	if err != nil {
		return s.taskError(r, err)
	}
	if t.State == task.StateApproved {
		s.run(r.id, t.ID)
	}
	return http.StatusCreated, t
}

// taskID is the {id} of r's path.
func taskID(r *request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	return id, err == nil && id > 0
}

func (s *Server) getTasks(r *request) (int, any) {
	q := ledger.TaskQuery{Limit: 100}
	if st := r.URL.Query()["state"]; len(st) > 0 {
		q.States = st
	}
	if c := r.URL.Query().Get("cursor"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n <= 0 {
			return http.StatusBadRequest, apiError("cursor %q: not one this API gave", c)
		}
		q.Before = n
	}
	ts, err := s.o.Tasks.List(r.Context(), q)
	if err != nil {
		return s.failed(r, err)
	}
	if ts == nil {
		ts = []task.Task{}
	}
	var next *string
	if len(ts) == q.Limit {
		c := strconv.FormatInt(ts[len(ts)-1].ID, 10)
		next = &c
	}
	return http.StatusOK, map[string]any{"items": ts, "next": next}
}

// filesPage is the size of a page of a task's files, unless the request
// asks for fewer; maxFilesPage the most a request may ask for.
const (
	filesPage    = 100
	maxFilesPage = 1000
)

// getTask answers the task with the first page of its files: what an
// approver is shown (task.View).
func (s *Server) getTask(r *request) (int, any) {
	id, ok := taskID(r)
	if !ok {
		return http.StatusNotFound, apiError("task %q: not a task id", r.PathValue("id"))
	}
	v, err := s.o.Tasks.View(r.Context(), id, filesPage)
	if err != nil {
		return s.taskError(r, err)
	}
	return http.StatusOK, v
}

// getTaskFiles answers a page of a task's files: ?offset= (0 first) and
// ?limit= (filesPage by default, at most maxFilesPage).
func (s *Server) getTaskFiles(r *request) (int, any) {
	id, ok := taskID(r)
	if !ok {
		return http.StatusNotFound, apiError("task %q: not a task id", r.PathValue("id"))
	}
	offset, oerr := intParam(r, "offset", 0)
	limit, lerr := intParam(r, "limit", filesPage)
	if oerr != nil || lerr != nil || offset < 0 || limit < 1 || limit > maxFilesPage {
		return http.StatusBadRequest, apiError("offset %q, limit %q: want whole numbers, offset from 0, limit from 1 to %d",
			r.URL.Query().Get("offset"), r.URL.Query().Get("limit"), maxFilesPage)
	}
	t, err := s.o.Tasks.Get(r.Context(), id)
	if err != nil {
		return s.taskError(r, err)
	}
	page, err := s.o.Tasks.Page(r.Context(), t, offset, limit)
	if err != nil {
		return s.failed(r, err)
	}
	return http.StatusOK, page
}

// intParam is r's query parameter name as a whole number, def when absent.
func intParam(r *request, name string, def int) (int, error) {
	if v := r.URL.Query().Get(name); v != "" {
		return strconv.Atoi(v)
	}
	return def, nil
}

// approveBody is the body of POST tasks/{id}/approve: the digest of the
// set the approver was shown (the task's "digest"), which the approval
// names. An empty body names none, and is refused.
type approveBody struct {
	Digest string `json:"digest"`
}

func (s *Server) postApprove(r *request) (int, any) {
	id, ok := taskID(r)
	if !ok {
		return r.refusal(http.StatusNotFound, apiError("task %q: not a task id", r.PathValue("id")))
	}
	var b approveBody
	dec := json.NewDecoder(http.MaxBytesReader(r.w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil && !errors.Is(err, io.EOF) {
		return r.refusal(http.StatusBadRequest, apiError("body: %v (want {\"digest\": \"the task's digest\"})", err))
	}
	t, err := s.o.Tasks.Approve(r.Context(), r.id, id, b.Digest)
	if err != nil {
		return s.taskError(r, err)
	}
	s.run(r.id, t.ID)
	return http.StatusOK, t
}

func (s *Server) postCancel(r *request) (int, any) {
	id, ok := taskID(r)
	if !ok {
		return r.refusal(http.StatusNotFound, apiError("task %q: not a task id", r.PathValue("id")))
	}
	t, err := s.o.Tasks.Cancel(r.Context(), r.id, id)
	if err != nil {
		return s.taskError(r, err)
	}
	// A running task stops after its chunk: give the answer its state then.
	deadline := time.Now().Add(2 * time.Second)
	for t.State == task.StateRunning && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if t, err = s.o.Tasks.Get(r.Context(), id); err != nil {
			return s.taskError(r, err)
		}
	}
	return http.StatusOK, t
}

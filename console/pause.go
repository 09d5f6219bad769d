package console

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/spoolq/spool/hold"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/task"
)

// The API of the operator's pause of the queue and holds of messages
// (package hold, docs/DESIGN.md, "Pause and hold"):
//
//	GET  /api/v1/holds          viewer    the pause, the msg_ids held, the files in held/
//	POST /api/v1/pause          operator  {"note": TEXT}: pause the queue
//	POST /api/v1/resume         operator  {"note": TEXT}: resume it
//	POST /api/v1/holds          operator  {"files": [...], "msg_ids": [...], "note": TEXT}: hold
//	POST /api/v1/holds/release  operator  {"files": [...], "msg_ids": [...]}: release
//
// Each action is package hold's, which audits it (and its refusals); the
// overview carries "paused" and "held" (holdOverview).

// registerHolds adds the routes above through api, Register's.
func (s *Server) registerHolds(api func(pattern string, min task.Role, action string, h func(*request) (int, any))) {
	api("GET /api/v1/holds", task.RoleViewer, "", s.getHolds)
	api("POST /api/v1/pause", task.RoleOperator, "pause", s.postPause)
	api("POST /api/v1/resume", task.RoleOperator, "resume", s.postResume)
	api("POST /api/v1/holds", task.RoleOperator, "hold", s.postHold)
	api("POST /api/v1/holds/release", task.RoleOperator, "release", s.postRelease)
}

// PauseJSON is the queue's pause as the API gives it.
type PauseJSON struct {
	Paused bool   `json:"paused"`
	By     string `json:"by"`
	Role   string `json:"role"`
	Via    string `json:"via"`
	Note   string `json:"note"`
	// At is when it was paused (or, once resumed, when it was resumed);
	// null when the queue was never paused.
	At *string `json:"at"`
}

func pauseJSON(p ledger.PauseState) PauseJSON {
	return PauseJSON{Paused: p.Paused, By: p.By, Role: p.Role, Via: p.Via, Note: p.Note, At: timeText(p.At)}
}

// holdOverview is what the overview says of the pause ("paused": its
// PauseJSON while paused, else null) and of what is held ("held":
// {"files", "msg_ids"}); what cannot be read is logged and left null.
func (s *Server) holdOverview(r *request) (paused, held any) {
	if s.o.Holds == nil {
		return nil, nil
	}
	p, err := s.o.Ledger.Holding().PauseState(r.Context())
	if err != nil {
		s.o.Log.Warn("overview: the queue's pause", "err", err)
	} else if p.Paused {
		paused = pauseJSON(p)
	}
	ids, err := s.o.Ledger.Holding().HeldIDs(r.Context())
	if err != nil {
		s.o.Log.Warn("overview: the msg_ids held", "err", err)
		return paused, nil
	}
	files, err := s.o.Dir.Count(queue.Held)
	if err != nil {
		s.o.Log.Warn("overview: the files held", "err", err)
		return paused, nil
	}
	return paused, map[string]int{"files": files, "msg_ids": len(ids)}
}

// heldFileJSON is one file in held/ as GET holds lists it.
type heldFileJSON struct {
	File  string  `json:"file"`
	MsgID *string `json:"msg_id"`
	Size  int64   `json:"size"`
	// Recorded is false for a file without a record (a hold killed
	// between its move and its record, or a file put there by hand): it
	// is held all the same. The fields below are then null or empty.
	Recorded bool    `json:"recorded"`
	Origin   *string `json:"origin"`
	Cause    *string `json:"cause"`
	By       string  `json:"by"`
	Role     string  `json:"role"`
	Via      string  `json:"via"`
	Note     string  `json:"note"`
	At       *string `json:"at"`
}

func (s *Server) getHolds(r *request) (int, any) {
	if s.o.Holds == nil {
		return http.StatusNotFound, apiError("no such endpoint")
	}
	st, err := s.o.Holds.State(r.Context())
	if err != nil {
		return s.failed(r, err)
	}
	ids := make([]map[string]any, 0, len(st.MsgIDs))
	for _, id := range st.MsgIDs {
		ids = append(ids, map[string]any{"msg_id": id.MsgID, "by": id.By, "role": id.Role, "via": id.Via, "note": id.Note, "at": timeText(id.At)})
	}
	files := make([]heldFileJSON, 0, len(st.Files))
	for _, f := range st.Files {
		j := heldFileJSON{File: f.Name, MsgID: optional(f.MsgID), Size: f.Size, Recorded: f.Record != nil}
		if rec := f.Record; rec != nil {
			j.Origin, j.Cause = optional(rec.Origin), optional(rec.Cause)
			j.By, j.Role, j.Via, j.Note, j.At = rec.By, rec.Role, rec.Via, rec.Note, timeText(rec.At)
		}
		files = append(files, j)
	}
	return http.StatusOK, map[string]any{"pause": pauseJSON(st.Pause), "msg_ids": ids, "files": files, "stale_records": len(st.Stale)}
}

// noteBody is the body of POST pause and resume.
type noteBody struct {
	Note string `json:"note"`
}

func (s *Server) postPause(r *request) (int, any)  { return s.setPause(r, true) }
func (s *Server) postResume(r *request) (int, any) { return s.setPause(r, false) }

func (s *Server) setPause(r *request, paused bool) (int, any) {
	if s.o.Holds == nil {
		return http.StatusNotFound, apiError("no such endpoint")
	}
	var b noteBody
	if code, body, ok := decodeBody(r, &b, "want {\"note\": TEXT}"); !ok {
		return code, body
	}
	var (
		c   hold.Change
		err error
	)
	if paused {
		c, err = s.o.Holds.Pause(r.Context(), r.id, b.Note)
	} else {
		c, err = s.o.Holds.Resume(r.Context(), r.id, b.Note)
	}
	if err != nil {
		return s.holdError(r, err)
	}
	now, err := s.o.Ledger.Holding().PauseState(r.Context())
	if err != nil {
		return s.failed(r, err)
	}
	return http.StatusOK, map[string]any{"changed": c.Changed, "before": pauseJSON(c.Before), "pause": pauseJSON(now)}
}

func (s *Server) postHold(r *request) (int, any)    { return s.holdAction(r, true) }
func (s *Server) postRelease(r *request) (int, any) { return s.holdAction(r, false) }

// holdAction holds (or releases) what r's body names, answering the
// service's Result: 200 with each item done or not and why.
func (s *Server) holdAction(r *request, holding bool) (int, any) {
	if s.o.Holds == nil {
		return http.StatusNotFound, apiError("no such endpoint")
	}
	var b hold.Request
	if code, body, ok := decodeBody(r, &b, "want {\"files\": [NAME...], \"msg_ids\": [ID...], \"note\": TEXT}"); !ok {
		return code, body
	}
	var (
		res hold.Result
		err error
	)
	if holding {
		res, err = s.o.Holds.Hold(r.Context(), r.id, b)
	} else {
		b.Note = ""
		res, err = s.o.Holds.Release(r.Context(), r.id, b)
	}
	if err != nil {
		return s.holdError(r, err)
	}
	if res.Items == nil {
		res.Items = []hold.Item{}
	}
	return http.StatusOK, res
}

// decodeBody reads r's JSON body into v, refusing (400, audited by the
// HTTP layer with the client's address) one that is not what want says.
func decodeBody(r *request, v any, want string) (int, any, bool) {
	dec := json.NewDecoder(http.MaxBytesReader(r.w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		code, body := r.refusal(http.StatusBadRequest, apiError("body: %v (%s)", err, want))
		return code, body, false
	}
	return 0, nil, true
}

// holdError answers err of the hold service, whose refusals it audited.
func (s *Server) holdError(r *request, err error) (int, any) {
	switch {
	case errors.Is(err, hold.ErrBadRequest):
		return http.StatusBadRequest, apiError("%v", err)
	case errors.Is(err, hold.ErrForbidden):
		return http.StatusForbidden, apiError("%v", err)
	}
	return s.failed(r, err)
}

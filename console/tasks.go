package console

import "net/http"

// Tasks is the durable replay and discard tasks a Server asks, lists,
// approves and cancels.
type Tasks interface{}

func (s *Server) noTasks() (int, any) {
	return http.StatusServiceUnavailable, apiError("tasks are not available on this server")
}

func (s *Server) getTasks(r *request) (int, any)    { return s.noTasks() }
func (s *Server) getTask(r *request) (int, any)     { return s.noTasks() }
func (s *Server) postReplay(r *request) (int, any)  { return s.noTasks() }
func (s *Server) postDiscard(r *request) (int, any) { return s.noTasks() }
func (s *Server) postApprove(r *request) (int, any) { return s.noTasks() }
func (s *Server) postCancel(r *request) (int, any)  { return s.noTasks() }

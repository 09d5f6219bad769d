package main

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressMin is the least backlog a drain shows a progress bar for: a
// smaller one is over before a bar would tell anybody anything.
const progressMin = 1000

// isTerminal reports whether f, a writer or a reader, is a terminal: a
// progress bar is for people watching, never for a file, a pipe or a
// journal, and a question is for someone at a keyboard.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

// stderrWriter is consume's stderr: it serialises whole writes (the logger,
// the notifier's goroutines and the progress bar share it, and each line
// must reach it in one piece), and while a progress bar is shown it clears
// the bar before a line and draws it again after, so that log lines and
// the bar do not overwrite each other.
type stderrWriter struct {
	mu  sync.Mutex
	w   io.Writer
	bar *progressbar.ProgressBar
}

func (s *stderrWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bar == nil {
		return s.w.Write(p)
	}
	_ = s.bar.Clear()
	n, err := s.w.Write(p)
	_ = s.bar.RenderBlank()
	return n, err
}

// startProgress shows a bar of total messages on s.
func (s *stderrWriter) startProgress(total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bar = progressbar.NewOptions(total,
		progressbar.OptionSetWriter(s.w),
		progressbar.OptionSetDescription("draining"),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("msg"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetRenderBlankState(true),
	)
}

// delivered counts one message that reached done/ or error/. The total is
// the backlog at the start: once it is reached the bar is full, and
// arrivals after the start are not shown.
func (s *stderrWriter) delivered() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bar != nil {
		_ = s.bar.Add(1)
	}
}

// stopProgress removes the bar, finished or not: the summary line on
// stdout says what the drain did.
func (s *stderrWriter) stopProgress() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bar == nil {
		return
	}
	_ = s.bar.Exit()
	_ = s.bar.Clear()
	s.bar = nil
}

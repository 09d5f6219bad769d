package spool

import (
	"context"
	"sync"
	"time"

	"github.com/spoolq/spool/queue"
)

// DefaultRescanInterval is how often a watching consumer scans inbox/
// when no notification has made it scan. Notifications are lost only when
// the kernel's queue overflows, which the consumer learns of and answers
// with a scan at once; the rescan bounds what any other loss (a bug, an
// unforeseen filesystem) can delay. A rescan of an idle queue is cheap
// (docs/PERFORMANCE.md, "Watching", has the figure). The claims of dead
// consumers are recovered on a clock of their own
// (DefaultRecoverInterval), and their moves back into inbox/ ring the
// watch.
const DefaultRescanInterval = time.Second

// watcher decides when a watching consumer scans inbox/ again: at once
// when a notification rings (queue.Arrivals), else at the next rescan, the
// next retry due or the time the youngest file held back by MinAge
// settles. Without notifications (Config.Poll, a network filesystem, no
// inotify left) every scan is a rescan, every PollInterval.
type watcher struct {
	c      *Consumer
	a      *queue.Arrivals // nil when polling
	every  time.Duration   // between rescans
	rescan *time.Timer
}

// watch starts the watcher of a Watch run.
func (c *Consumer) watch() *watcher {
	w := &watcher{c: c, every: c.cfg.RescanInterval}
	poll := func(why string, args ...any) *watcher {
		w.every = c.cfg.PollInterval
		c.log.Info(why+"; polling inbox/", append(args, "interval", w.every)...)
		w.rescan = time.NewTimer(w.every)
		return w
	}
	if c.cfg.Poll {
		return poll("notifications not used (Config.Poll, consume --poll)")
	}
	if fs, remote, err := c.dir.RemoteFS(); err != nil {
		return poll("cannot tell inbox/'s filesystem", "err", err)
	} else if remote {
		return poll("inbox/ is on a network or FUSE filesystem, whose notifications miss other hosts' writes", "fs", fs)
	}
	a, err := c.dir.WatchInbox()
	if err != nil {
		return poll("no filesystem notifications", "err", err)
	}
	w.a = a
	w.rescan = time.NewTimer(w.every)
	return w
}

// close stops the watch.
func (w *watcher) close() {
	w.rescan.Stop()
	if w.a != nil {
		if err := w.a.Close(); err != nil {
			w.c.log.Warn("stopping the watch of inbox/", "err", err)
		}
	}
}

// wait returns when inbox/ should be scanned again, or false when ctx is
// done. due is the time the next held retry falls due (held says whether
// there is one). It returns at once too when failed, the recovery clock's,
// is closed: the run then ends the session. Rescans and overflows are
// counted in st and told to the Observer. Nothing on this path waits for a
// batch to fill: an arrival at an idle consumer is scanned, claimed,
// committed and moved at once.
func (w *watcher) wait(ctx context.Context, st *Stats, due time.Time, held bool, failed <-chan struct{}) bool {
	c := w.c
	var soon <-chan time.Time // a retry due, or a young file old enough
	if at, ok := c.young.take(); ok && (!held || at.Before(due)) {
		due, held = at, true
	}
	if held {
		t := time.NewTimer(max(time.Until(due), 0))
		defer t.Stop()
		soon = t.C
	}
	var bell <-chan struct{}
	if w.a != nil {
		bell = w.a.Bell()
	}
	select {
	case <-ctx.Done():
		return false
	case <-failed:
		return true
	case <-soon:
		return true
	case <-w.rescan.C:
		w.rescanned(st, false)
	case <-bell:
		if n := w.a.Overflowed(); n > 0 {
			st.Overflows += n
			c.log.Info("notifications overflowed; rescanning", "overflows", st.Overflows)
			w.rescanned(st, true)
			return true
		}
		if err := w.a.Err(); err != nil {
			// The bell can no longer be trusted: poll from now on.
			c.log.Warn("the watch of inbox/ failed; polling inbox/", "err", err, "interval", c.cfg.PollInterval)
			w.a.Close()
			w.a, w.every = nil, c.cfg.PollInterval
			w.rescanned(st, true)
			return true
		}
		return true
	}
	return true
}

// rescanned counts a scan that no notification asked for, and starts the
// timer of the next.
func (w *watcher) rescanned(st *Stats, overflow bool) {
	st.Rescans++
	w.c.cfg.Observer.Rescanned(overflow)
	if !w.rescan.Stop() {
		select {
		case <-w.rescan.C:
		default:
		}
	}
	w.rescan.Reset(w.every)
}

// ageClock remembers the earliest time a file that MinAge held back will
// be old enough, so that a watching consumer scans again then.
type ageClock struct {
	mu  sync.Mutex
	at  time.Time
	set bool
}

func (s *ageClock) note(at time.Time) {
	s.mu.Lock()
	if !s.set || at.Before(s.at) {
		s.at, s.set = at, true
	}
	s.mu.Unlock()
}

// take returns the earliest time noted since the last take, and forgets it:
// every scan notes again the files it still holds back.
func (s *ageClock) take() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.at, s.set
	s.set = false
	return at, ok
}

// oldEnough reports whether a file of inbox/ is old enough to claim: it has
// not changed for MinAge (queue.Dir.Changed: neither its content, its size
// nor its times). One that is not yet is left in inbox/, and the time it will be old enough
// noted. A file that cannot be looked at is left to the claim, which
// finds it gone or fails as it would without MinAge.
func (c *Consumer) oldEnough(name string) bool {
	if c.cfg.MinAge <= 0 {
		return true
	}
	changed, err := c.dir.Changed(queue.Inbox, name)
	if err != nil {
		return true
	}
	now := time.Now()
	if now.Sub(changed) >= c.cfg.MinAge {
		return true
	}
	if changed.After(now) {
		changed = now // another host's clock ahead: it counts as changed now
	}
	c.young.note(changed.Add(c.cfg.MinAge))
	return false
}

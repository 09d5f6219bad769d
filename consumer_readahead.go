package spool

import (
	"sync/atomic"

	"github.com/spoolq/spool/queue"
)

// prefetcher reads ahead each chunk of inbox/ while the chunk before it
// is claimed, in a goroutine of its own, as long as the backlog is found
// cold: that is, while the session's reads or the prefetcher itself met
// files whose data had left the page cache since the chunk before. A warm
// backlog is never read ahead, so it pays nothing for it.
//
// Why: a cold file costs a worker a wait for the disk, and the pool's
// workers wait one file each; queued together by Prefetch, the same reads
// are served many at once. Measured on 100k and 1M backlogs
// (docs/PERFORMANCE.md, "Kept, and what it bought").
type prefetcher struct {
	s      *queue.Session
	chunks chan []string
	done   chan struct{}
	cold   atomic.Int64 // cold files the prefetcher met
	seen   int64        // cold reads and finds counted at the last offer
	// coldBefore is the session's ColdReads when the pass began.
	coldBefore int64
}

func (c *Consumer) startPrefetch(s *queue.Session) *prefetcher {
	p := &prefetcher{s: s, chunks: make(chan []string, 1), done: make(chan struct{}), coldBefore: s.ColdReads()}
	p.seen = p.coldBefore
	go func() {
		defer close(p.done)
		limit := c.cfg.Contract.Limit()
		for names := range p.chunks {
			p.cold.Add(int64(c.dir.Prefetch(queue.Inbox, names, limit)))
		}
	}()
	return p
}

// offer has the chunk read ahead if files were found cold since the last
// offer. It never waits: the chunk is queued behind the one being read
// ahead, or skipped if another is queued already.
func (p *prefetcher) offer(names []string) {
	cold := p.s.ColdReads() + p.cold.Load()
	if cold == p.seen {
		return
	}
	p.seen = cold
	select {
	case p.chunks <- names:
	default:
	}
}

// stop ends the prefetching of a pass and adds what it saw to st.
func (p *prefetcher) stop(st *Stats) {
	close(p.chunks)
	<-p.done
	st.ColdReads += int(p.s.ColdReads() - p.coldBefore)
	st.ReadAhead += int(p.cold.Load())
}

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/internal/sample"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
	"golang.org/x/sys/unix"
)

// WatchOptions choose what Watch measures.
type WatchOptions struct {
	Parent string // where the temporary queue goes; "" means os.TempDir
	Keep   bool   // keep the temporary queue
	// Idle is how long the watching consumer is left idle while its
	// processor time is measured.
	Idle time.Duration
	// Trickle messages arrive one at a time, Gap apart.
	Trickle int
	Gap     time.Duration
	// Rate messages a second arrive for Steady.
	Rate   int
	Steady time.Duration
	// Poll, when positive, makes the consumer poll at that interval
	// instead of waiting for notifications (Config.Poll), for comparison.
	Poll time.Duration
}

// Latency summarises the enqueue-to-done/ latencies of a phase.
type Latency struct {
	N             int
	P50, P99, Max time.Duration
	Elapsed       time.Duration // from the first arrival to the last one done
	RateOffered   float64       // arrivals per second achieved by the producer
	Missing       int           // messages never seen in done/ (must be 0)
}

// WatchReport is the outcome of Watch.
type WatchReport struct {
	Options WatchOptions
	// IdleCPU is the process's processor time over the idle period, as a
	// fraction of one core.
	IdleCPU         float64
	IdleRescans     int // the consumer's rescans of inbox/ while idle
	Trickle, Steady Latency
	Stats           spool.Stats
}

// Watch measures a watching consumer (spool.Consumer.Watch, durable, the
// SQLite ledger) in this process: its processor time while idle, then the
// latency from the rename of a message into inbox/ to its file being in
// done/ durably, for messages arriving one at a time and at a steady
// rate. A message's latency ends when an fsync of done/, issued after its
// move was seen (Config.OnDelivery), returns: an upper bound of when the
// move was durable, measured from outside the consumer. The messages are
// written beforehand into a directory beside inbox/ on the same
// filesystem, so that an arrival is a rename alone, as a producer's
// publication is.
func Watch(ctx context.Context, o WatchOptions) (WatchReport, error) {
	rep := WatchReport{Options: o}
	root, remove, err := runRoot(o.Parent, "spool-bench-watch-", o.Keep)
	if err != nil {
		return rep, err
	}
	defer remove()
	q, staged := filepath.Join(root, "q"), filepath.Join(root, "staged")
	if err := queue.Init(q); err != nil {
		return rep, err
	}
	if err := os.Mkdir(staged, 0o755); err != nil {
		return rep, fmt.Errorf("bench: %w", err)
	}
	nSteady := int(float64(o.Rate) * o.Steady.Seconds())
	var names []string
	if _, err := sample.Generate(o.Trickle+nSteady, sample.Options{Seed: 1}, func(f sample.File) error {
		names = append(names, f.Name)
		return os.WriteFile(filepath.Join(staged, f.Name), f.Data, 0o644)
	}); err != nil {
		return rep, err
	}
	unix.Sync()

	d, err := queue.Open(q)
	if err != nil {
		return rep, err
	}
	defer d.Close()
	l, err := sqlite.OpenWith(ctx, filepath.Join(q, "ledger.db"), sqlite.Options{})
	if err != nil {
		return rep, err
	}
	defer l.Close()
	doneFd, err := unix.Open(d.StagePath(queue.Done), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return rep, fmt.Errorf("bench: open done: %w", err)
	}
	defer unix.Close(doneFd)

	col := newCollector(len(names))
	var rescans rescanCounter
	c, err := spool.NewConsumer(d, l.Consumer(), spool.Config{
		Poll: o.Poll > 0, PollInterval: o.Poll, Observer: &rescans,
		OnDelivery: func(dl *spool.Delivery, _ spool.Result, _ string) { col.seen <- dl.File },
	})
	if err != nil {
		return rep, err
	}
	colDone := make(chan error, 1)
	go func() { colDone <- col.run(doneFd) }()

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	type result struct {
		st  spool.Stats
		err error
	}
	watched := make(chan result, 1)
	go func() {
		st, err := c.Watch(wctx)
		watched <- result{st, err}
	}()

	// Idle: let the start-up settle, then measure.
	if err := sleep(ctx, time.Second); err != nil {
		return rep, err
	}
	cpu, t0, r0 := cpuTime(), time.Now(), rescans.n.Load()
	if err := sleep(ctx, o.Idle); err != nil {
		return rep, err
	}
	rep.IdleCPU = float64(cpuTime()-cpu) / float64(time.Since(t0))
	rep.IdleRescans = int(rescans.n.Load() - r0)

	arrive := func(names []string, gap time.Duration) (Latency, error) {
		var lat Latency
		start := time.Now()
		for i, name := range names {
			if wait := time.Until(start.Add(time.Duration(i) * gap)); wait > 0 {
				if err := sleep(ctx, wait); err != nil {
					return lat, err
				}
			}
			col.arriving(name)
			if err := os.Rename(filepath.Join(staged, name), filepath.Join(q, "inbox", name)); err != nil {
				return lat, fmt.Errorf("bench: %w", err)
			}
		}
		if len(names) > 1 {
			lat.RateOffered = float64(len(names)-1) / time.Since(start).Seconds()
		}
		// Every message should be done within seconds; a minute means
		// something was lost.
		deadline := time.Now().Add(time.Minute)
		for !col.allDone(names) && time.Now().Before(deadline) {
			if err := sleep(ctx, 10*time.Millisecond); err != nil {
				return lat, err
			}
		}
		lat = col.latency(names, lat.RateOffered)
		lat.Elapsed = col.last(names).Sub(start)
		return lat, nil
	}
	if rep.Trickle, err = arrive(names[:o.Trickle], o.Gap); err != nil {
		return rep, err
	}
	var gap time.Duration
	if o.Rate > 0 {
		gap = time.Second / time.Duration(o.Rate)
	}
	if rep.Steady, err = arrive(names[o.Trickle:], gap); err != nil {
		return rep, err
	}
	stop()
	res := <-watched
	close(col.seen)
	if cerr := <-colDone; res.err == nil {
		res.err = cerr
	}
	rep.Stats = res.st
	return rep, res.err
}

// rescanCounter counts the consumer's rescans as they happen (its Stats
// come only at the end of the run).
type rescanCounter struct {
	spool.NopObserver
	n atomic.Int64
}

func (r *rescanCounter) Rescanned(bool) { r.n.Add(1) }

// collector stamps each message when its move to done/ is durable.
type collector struct {
	seen chan string // files moved out of processing/, from OnDelivery
	mu   sync.Mutex
	in   map[string]time.Time // when each file was renamed into inbox/
	out  map[string]time.Time // when its move to done/ was durable
}

func newCollector(n int) *collector {
	return &collector{
		seen: make(chan string, n),
		in:   make(map[string]time.Time, n),
		out:  make(map[string]time.Time, n),
	}
}

// arriving notes the time a file is renamed into inbox/ (just before).
func (c *collector) arriving(name string) {
	c.mu.Lock()
	c.in[name] = time.Now()
	c.mu.Unlock()
}

// run takes every file seen so far, fsyncs done/, and stamps them all.
func (c *collector) run(doneFd int) error {
	var batch []string
	for name := range c.seen {
		batch = append(batch[:0], name)
	more:
		for {
			select {
			case n, ok := <-c.seen:
				if !ok {
					break more
				}
				batch = append(batch, n)
			default:
				break more
			}
		}
		if err := unix.Fsync(doneFd); err != nil {
			return fmt.Errorf("bench: sync done: %w", err)
		}
		now := time.Now()
		c.mu.Lock()
		for _, n := range batch {
			c.out[n] = now
		}
		c.mu.Unlock()
	}
	return nil
}

func (c *collector) allDone(names []string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		if _, ok := c.out[n]; !ok {
			return false
		}
	}
	return true
}

func (c *collector) last(names []string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t time.Time
	for _, n := range names {
		if o := c.out[n]; o.After(t) {
			t = o
		}
	}
	return t
}

func (c *collector) latency(names []string, rate float64) Latency {
	c.mu.Lock()
	defer c.mu.Unlock()
	lat := Latency{RateOffered: rate}
	var ds []time.Duration
	for _, n := range names {
		o, ok := c.out[n]
		if !ok {
			lat.Missing++
			continue
		}
		ds = append(ds, o.Sub(c.in[n]))
	}
	slices.Sort(ds)
	lat.N = len(ds)
	if len(ds) > 0 {
		lat.P50, lat.P99, lat.Max = ds[len(ds)/2], ds[len(ds)*99/100], ds[len(ds)-1]
	}
	return lat
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

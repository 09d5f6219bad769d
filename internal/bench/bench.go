// Package bench measures a durable drain of a generated queue against the
// least any consumer must do per message (rename in, read, rename out), in
// the same process and on the same kind of directory, so that the ratio
// between the two is the figure to quote: absolute rates drift on shared
// machines, the ratio much less.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/batch"
	"github.com/spoolq/spool/internal/pagecache"
	"github.com/spoolq/spool/internal/sample"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/postgres"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
	"golang.org/x/sys/unix"
)

// latencySamples bounds the latency sample.
const latencySamples = 1 << 14

// Options choose what to measure.
type Options struct {
	N          int     // messages to generate
	DupFrac    float64 // fraction of redeliveries
	PoisonFrac float64 // fraction of poison messages
	Seed       int64
	Parent     string // where the temporary queues go; "" means os.TempDir
	Floor      bool   // also run the floor loops
	Relaxed    bool   // relaxed durability (ledger and directory syncs)
	Workers    int    // consumer workers; 0 means the default
	Batch      int    // consumer batch size; 0 means the default
	Keep       bool   // keep the temporary directories
	// DB is a ledger DSN (postgres://, mysql://) for the drain's ledger,
	// in a namespace of each round's own there (ledger.Scratch), removed
	// afterwards. Empty: the queue's SQLite ledger.
	DB string
	// Cold evicts each generated queue's files from the page cache before
	// its run, as for a backlog that sat on disk (overnight, or on a host
	// that reclaims idle page cache): the drain then reads the messages
	// from the disk, not from memory. Otherwise the queue is as warm as
	// its generation left it, which for a large N is partly cold already
	// on hosts that reclaim idle pages after a minute or so.
	Cold bool
	// Rounds is how many times the whole measurement runs, spool and the
	// floors interleaved, each on freshly generated queues; 0 means 1. On a
	// shared machine whose speed drifts from minute to minute, the median
	// of the rounds' ratios is the figure to quote.
	Rounds int
	// CPUProfile, when set, receives a CPU profile of spool's drain only
	// (not of the generation or the floors), in the first round.
	CPUProfile io.Writer
	// Format, when "jsonl" or "csv", writes the N messages as the records
	// of one batch file of that format instead of a file each, and drains
	// it as a queue of batch files (spool.conf's format); "" is a file a
	// message. The floors still move a file a message: the ratio says
	// what a batch file saves.
	Format string
	// Syscalls counts the process's system calls during each run (see
	// syscallCounter). Off by default: a counted system call takes the
	// kernel's slower traced path, so the rates and CPU of a counting run
	// are a little worse than an uncounted one's.
	Syscalls bool
}

// Run is one measured drain.
type Run struct {
	Name    string
	N       int
	Elapsed time.Duration
	CPU     time.Duration // user and system time of the whole process during the run
	// ServerCPU is the user and system time of the PostgreSQL backends
	// serving --db's database during the run, when they run on this
	// machine (ServerSeen); see postgres.ServerCPU.
	ServerCPU  time.Duration
	ServerSeen bool
	P50, P99   time.Duration // per message, claim to done/error (spool only)
	// Syscalls is how many system calls the whole process made during
	// the run, when Options.Syscalls counted them (SyscallsSeen).
	Syscalls     uint64
	SyscallsSeen bool
}

// SyscallsPerMessage is the run's system calls per message.
func (r Run) SyscallsPerMessage() float64 {
	if r.N == 0 {
		return 0
	}
	return float64(r.Syscalls) / float64(r.N)
}

// CPUPerMessage is the processor time spent per message, on all cores: on a
// machine whose cores are all busy, it is what bounds the rate.
func (r Run) CPUPerMessage() time.Duration {
	if r.N == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.N)
}

// meter measures one run: its wall time, the process's CPU time and,
// with a counter, its system calls.
type meter struct {
	start time.Time
	cpu   time.Duration
	sc    *syscallCounter
	calls uint64
}

// startMeter starts measuring; sc may be nil (no counting).
func startMeter(sc *syscallCounter) (m meter, err error) {
	m.sc = sc
	if sc != nil {
		if m.calls, err = sc.Count(); err != nil {
			return m, err
		}
	}
	m.start, m.cpu = time.Now(), cpuTime()
	return m, nil
}

// stop fills run's Elapsed, CPU and system calls since startMeter.
func (m meter) stop(run *Run) error {
	run.Elapsed, run.CPU = time.Since(m.start), cpuTime()-m.cpu
	if m.sc == nil {
		return nil
	}
	calls, err := m.sc.Count()
	if err != nil {
		return err
	}
	run.Syscalls, run.SyscallsSeen = calls-m.calls, true
	return nil
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Rate is messages per second.
func (r Run) Rate() float64 { return float64(r.N) / r.Elapsed.Seconds() }

// Round is one measurement: spool's drain, then the floors if asked for.
type Round struct {
	Spool  Run
	Got    spool.Stats
	Floors []Run // plain os calls, then dirfd-relative calls; with Format and SQLite, the ledger's rows
}

// Ratio is spool's rate as a fraction of the i-th floor's in this round.
func (r Round) Ratio(i int) float64 { return r.Spool.Rate() / r.Floors[i].Rate() }

// Report is the outcome of Bench.
type Report struct {
	Options  Options
	Expected sample.Expected // the same in every round: same seed
	Rounds   []Round
	PeakRSS  int64 // bytes, the process's high-water mark after the drains
	// SyscallsNote says why Options.Syscalls counted nothing; "" when it
	// counted or was not asked.
	SyscallsNote string
}

// Exact reports whether a round's outcome counts are the generated ones: a
// fast but wrong run must not pass for a result.
func (r Report) Exact(round Round) bool {
	return round.Got.Processed == r.Expected.Unique && round.Got.Duplicates == r.Expected.Duplicates &&
		round.Got.DeadLetters == r.Expected.DeadLetters
}

// AllExact reports whether every round was exact.
func (r Report) AllExact() bool {
	for _, round := range r.Rounds {
		if !r.Exact(round) {
			return false
		}
	}
	return len(r.Rounds) > 0
}

// Median is the median over the rounds of f (the mean of the middle two
// for an even count).
func (r Report) Median(f func(Round) float64) float64 {
	if len(r.Rounds) == 0 {
		return 0
	}
	xs := make([]float64, len(r.Rounds))
	for i, round := range r.Rounds {
		xs[i] = f(round)
	}
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 0 {
		return (xs[m-1] + xs[m]) / 2
	}
	return xs[m]
}

// Bench runs the rounds: in each, it generates a queue and drains it with
// spool, then runs the floors, each on a queue of its own.
func Bench(ctx context.Context, o Options) (Report, error) {
	rep := Report{Options: o}
	var sc *syscallCounter
	if o.Syscalls {
		var err error
		if sc, err = openSyscallCounter(); err != nil {
			rep.SyscallsNote = err.Error()
		} else {
			defer sc.Close()
		}
	}
	root, remove, err := runRoot(o.Parent, "spool-bench-", o.Keep)
	if err != nil {
		return rep, err
	}
	defer remove()
	// One round runs in root itself; several get a directory each, freed
	// as soon as the round is over.
	perRound := o.Rounds > 1
	for i := range max(o.Rounds, 1) {
		dir := root
		if perRound {
			dir = filepath.Join(root, fmt.Sprintf("round-%d", i+1))
		}
		round, exp, err := bench(ctx, dir, o, sc, i == 0)
		if err != nil {
			return rep, err
		}
		rep.Expected = exp
		rep.Rounds = append(rep.Rounds, round)
		if perRound && !o.Keep {
			// A million-message round leaves gigabytes: free them before
			// the next one.
			if err := os.RemoveAll(dir); err != nil {
				return rep, fmt.Errorf("bench: %w", err)
			}
		}
	}
	rep.PeakRSS = peakRSS()
	return rep, nil
}

// bench is one round, in root.
func bench(ctx context.Context, root string, o Options, sc *syscallCounter, first bool) (Round, sample.Expected, error) {
	var round Round
	gen := sample.Options{DupFrac: o.DupFrac, PoisonFrac: o.PoisonFrac, Seed: o.Seed}
	// Each queue is generated right before its run and flushed first, so
	// every run starts with the same state of the page cache and no
	// writeback of its own generation landing on it.
	prepare := func(name string) (string, sample.Expected, error) {
		dir := filepath.Join(root, name)
		exp, err := generate(dir, o.N, gen)
		syscall.Sync()
		if err == nil && o.Cold {
			err = evict(dir)
		}
		return dir, exp, err
	}
	spoolPrepare := prepare
	if o.Format != "" {
		spoolPrepare = func(name string) (string, sample.Expected, error) {
			dir := filepath.Join(root, name)
			exp, err := generateBatch(dir, o.N, gen, o.Format)
			syscall.Sync()
			if err == nil && o.Cold {
				err = evict(dir)
			}
			return dir, exp, err
		}
	}
	qdir, exp, err := spoolPrepare("spool")
	if err != nil {
		return round, exp, err
	}
	if !first {
		o.CPUProfile = nil
	}
	if round.Spool, round.Got, err = drain(ctx, qdir, o, sc); err != nil {
		return round, exp, err
	}
	if !o.Floor {
		return round, exp, nil
	}
	for _, f := range []struct {
		name string
		run  func(string, *syscallCounter) (Run, error)
	}{{"floor-os", floorOS}, {"floor-dirfd", floorDirfd}} {
		dir, _, err := prepare(f.name)
		if err != nil {
			return round, exp, err
		}
		r, err := f.run(dir, sc)
		if err != nil {
			return round, exp, err
		}
		round.Floors = append(round.Floors, r)
	}
	if o.Format != "" && o.DB == "" {
		// A batch file's records: the least their SQLite ledger costs.
		dir := filepath.Join(root, "floor-ledger")
		if err := os.Mkdir(dir, 0o755); err != nil {
			return round, exp, fmt.Errorf("bench: %w", err)
		}
		r, err := floorLedger(ctx, dir, o.N, gen, o.Relaxed, sc)
		if err != nil {
			return round, exp, err
		}
		round.Floors = append(round.Floors, r)
	}
	return round, exp, nil
}

// generate writes n generated messages straight into a new queue's inbox.
// Generation is not measured and the queue is private, so plain writes do.
func generate(dir string, n int, o sample.Options) (sample.Expected, error) {
	if err := queue.Init(dir); err != nil {
		return sample.Expected{}, err
	}
	inbox := filepath.Join(dir, string(queue.Inbox))
	return sample.Generate(n, o, func(f sample.File) error {
		return os.WriteFile(filepath.Join(inbox, f.Name), f.Data, 0o644)
	})
}

// evict drops the (clean, just synced) pages of the messages in a queue's
// inbox/ from the page cache. The inodes and the directory's own blocks stay
// cached: only the messages' contents must come from the disk again.
func evict(dir string) error {
	d, err := queue.Open(dir)
	if err != nil {
		return fmt.Errorf("bench: evict: %w", err)
	}
	defer d.Close()
	inbox := d.StagePath(queue.Inbox)
	return d.Scan(queue.Inbox, func(names []string) error {
		for _, n := range names {
			if err := pagecache.Evict(filepath.Join(inbox, n)); err != nil {
				return fmt.Errorf("bench: %w", err)
			}
		}
		return nil
	})
}

func drain(ctx context.Context, dir string, o Options, sc *syscallCounter) (run Run, st spool.Stats, err error) {
	run = Run{Name: "spool"}
	d, err := queue.Open(dir)
	if err != nil {
		return run, spool.Stats{}, err
	}
	defer d.Close()
	var l *ledger.DB
	if o.DB != "" {
		dsn, drop, err := ledger.Scratch(ctx, o.DB)
		if err != nil {
			return run, spool.Stats{}, fmt.Errorf("--db: %w", err)
		}
		defer func() {
			if derr := drop(context.WithoutCancel(ctx)); derr != nil && err == nil {
				err = fmt.Errorf("bench: %w", derr)
			}
		}()
		l, err = ledger.Open(ctx, dsn, ledger.OpenOptions{})
	} else {
		l, err = sqlite.OpenWith(ctx, filepath.Join(dir, "ledger.db"), sqlite.Options{Relaxed: o.Relaxed})
	}
	if err != nil {
		return run, spool.Stats{}, err
	}
	defer l.Close()
	var mu sync.Mutex
	// A reservoir sample of the latencies: quantiles stay unbiased while
	// memory stays flat at a million messages (the RSS is measured too).
	lat := make([]time.Duration, 0, min(o.N, latencySamples))
	seen := 0
	var files spool.BatchFiles
	if o.Format != "" {
		conf := &queueopen.Config{Format: batch.Format{Kind: o.Format}}
		if files, err = queueopen.Batch(d, conf, spool.DefaultContract()); err != nil {
			return run, spool.Stats{}, fmt.Errorf("bench: %w", err)
		}
	}
	c, err := spool.NewConsumer(d, l.Consumer(), spool.Config{
		Workers: o.Workers, BatchSize: o.Batch, Relaxed: o.Relaxed, Batch: files,
		OnDelivery: func(dl *spool.Delivery, _ spool.Result, _ string) {
			d := time.Since(dl.Claimed)
			mu.Lock()
			defer mu.Unlock()
			seen++
			if len(lat) < cap(lat) {
				lat = append(lat, d)
			} else if j := rand.IntN(seen); j < len(lat) {
				lat[j] = d
			}
		},
	})
	if err != nil {
		return run, spool.Stats{}, err
	}
	if o.CPUProfile != nil {
		if err := pprof.StartCPUProfile(o.CPUProfile); err != nil {
			return run, spool.Stats{}, fmt.Errorf("bench: %w", err)
		}
	}
	srv0, seen0 := postgres.ServerCPU(o.DB)
	m, err := startMeter(sc)
	if err != nil {
		return run, spool.Stats{}, err
	}
	st, err = c.Drain(ctx)
	if merr := m.stop(&run); err == nil {
		err = merr
	}
	if srv1, seen1 := postgres.ServerCPU(o.DB); seen0 && seen1 {
		run.ServerCPU, run.ServerSeen = srv1-srv0, true
	}
	if o.CPUProfile != nil {
		pprof.StopCPUProfile()
	}
	run.N = st.Total()
	slices.Sort(lat)
	if len(lat) > 0 {
		run.P50 = lat[len(lat)/2]
		run.P99 = lat[len(lat)*99/100]
	}
	return run, st, err
}

// floorOS is the minimal consumer with package os: rename in, read, rename
// out; no parsing, no ledger, no fsync, one goroutine.
func floorOS(dir string, sc *syscallCounter) (Run, error) {
	run := Run{Name: "floor (os)"}
	inbox, proc, done := filepath.Join(dir, "inbox"), filepath.Join(dir, "processing"), filepath.Join(dir, "done")
	f, err := os.Open(inbox)
	if err != nil {
		return run, err
	}
	defer f.Close()
	m, err := startMeter(sc)
	if err != nil {
		return run, err
	}
	for {
		names, err := f.Readdirnames(queue.ScanChunk)
		for _, n := range names {
			if err := os.Rename(filepath.Join(inbox, n), filepath.Join(proc, n)); err != nil {
				return run, err
			}
			if _, err := os.ReadFile(filepath.Join(proc, n)); err != nil {
				return run, err
			}
			if err := os.Rename(filepath.Join(proc, n), filepath.Join(done, n)); err != nil {
				return run, err
			}
			run.N++
		}
		if err != nil {
			break
		}
	}
	return run, m.stop(&run)
}

// floorDirfd is floorOS with dirfd-relative system calls on open directory
// descriptors, which skip path resolution from the root: the physical
// limit of this loop on this machine.
func floorDirfd(dir string, sc *syscallCounter) (Run, error) {
	run := Run{Name: "floor (dirfd)"}
	var fds [3]int
	for i, s := range []string{"inbox", "processing", "done"} {
		fd, err := unix.Open(filepath.Join(dir, s), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return run, err
		}
		defer unix.Close(fd)
		fds[i] = fd
	}
	f, err := os.Open(filepath.Join(dir, "inbox"))
	if err != nil {
		return run, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	m, err := startMeter(sc)
	if err != nil {
		return run, err
	}
	for {
		names, err := f.Readdirnames(queue.ScanChunk)
		for _, n := range names {
			if err := unix.Renameat(fds[0], n, fds[1], n); err != nil {
				return run, err
			}
			fd, err := unix.Openat(fds[1], n, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return run, err
			}
			for {
				k, err := unix.Read(fd, buf)
				if err != nil {
					unix.Close(fd)
					return run, err
				}
				if k == 0 {
					break
				}
			}
			if err := unix.Close(fd); err != nil {
				return run, err
			}
			if err := unix.Renameat(fds[1], n, fds[2], n); err != nil {
				return run, err
			}
			run.N++
		}
		if err != nil {
			break
		}
	}
	if err := m.stop(&run); err != nil {
		return run, err
	}
	if run.N == 0 {
		return run, errors.New("floor: nothing to drain")
	}
	return run, nil
}

// peakRSS is the process's resident-set high-water mark in bytes.
func peakRSS() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024
}

// runRoot makes the directory a run works in: a fresh one named
// prefix* under parent (os.TempDir() when empty). remove, for a deferred
// call, deletes it with all the run wrote, unless keep (--keep, to look
// at the queue afterwards).
func runRoot(parent, prefix string, keep bool) (root string, remove func(), err error) {
	if parent == "" {
		parent = os.TempDir()
	}
	root, err = os.MkdirTemp(parent, prefix)
	if err != nil {
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	if keep {
		return root, func() {}, nil
	}
	return root, func() { os.RemoveAll(root) }, nil
}

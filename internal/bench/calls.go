package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/batch"
	"github.com/spoolq/spool/handler"
	"github.com/spoolq/spool/internal/sample"
	"github.com/spoolq/spool/ledger"

	// The server backends, registered for --db.
	_ "github.com/spoolq/spool/ledger/mysql"
	_ "github.com/spoolq/spool/ledger/postgres"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
	"golang.org/x/sys/unix"
)

// CallOptions choose a run with an external handler (spool bench
// --handler): a local endpoint or command of a given latency, and
// consumers calling it with a given concurrency.
type CallOptions struct {
	N          int
	DupFrac    float64
	PoisonFrac float64
	Seed       int64
	Parent     string
	Keep       bool
	// Handler is "post" (an HTTP endpoint in this process that answers
	// after Latency) or "exec" (sleep Latency in /bin/sh).
	Handler     string
	Latency     time.Duration
	Concurrency int // per consumer; 0 means spool.DefaultConcurrency
	Batch       int // 0 means the default
	// Procs is how many consumers: 1 runs it in this process; more run
	// that many `Exe consume` processes at once on the one queue.
	Procs int
	Exe   string
	// Format, when "jsonl" or "csv", writes the N messages as the records
	// of one batch file, each record then called as a message is. With
	// one consumer (Procs 1) only.
	Format string
	// DB is a ledger DSN (postgres://, mysql://, an SQLite path); the run
	// gets a namespace of its own there (ledger.Scratch: a schema, a
	// database, a directory), removed afterwards. Empty: the queue's
	// SQLite ledger.
	DB string
	// CPUProfile, when set, receives a CPU profile of this process during
	// the drain: the consumer and the endpoint with Procs 1, the endpoint
	// alone with more.
	CPUProfile io.Writer
}

// CallReport is what a run with an external handler measured.
type CallReport struct {
	Run      Run // CPU: this process and its consumer processes
	Got      spool.Stats
	Expected sample.Expected
	// Calls is how many calls reached the endpoint or command.
	Calls int64
	// MaxInFlight and MeanInFlight are the calls in flight at once, at
	// most and on average over the run (total call time / elapsed);
	// measured at the endpoint for post, around the command for exec in
	// one process, and unknown (-1) for exec in several.
	MaxInFlight  int64
	MeanInFlight float64
	// Ideal is Procs × Concurrency / Latency: the rate if every slot were
	// always busy with a call.
	Ideal float64
	// StartRate, for exec, is how many times a second this machine runs
	// the command with no latency, `/bin/sh -c "sleep 0"` (a shell and the
	// sleep program: dash does not exec a -c command's last program in
	// place of itself), at the same concurrency, measured in the same run
	// just before the drain: the most an --exec consumer could call it.
	StartRate float64
}

// Exact reports whether the outcome counts are the generated ones.
func (r CallReport) Exact() bool {
	return r.Got.Processed == r.Expected.Unique && r.Got.Duplicates == r.Expected.Duplicates &&
		r.Got.DeadLetters == r.Expected.DeadLetters
}

// inFlight counts calls in flight and their total time.
type inFlight struct {
	calls, now, max atomic.Int64
	busy            atomic.Int64 // nanoseconds
}

func (f *inFlight) begin() time.Time {
	f.calls.Add(1)
	n := f.now.Add(1)
	for {
		m := f.max.Load()
		if n <= m || f.max.CompareAndSwap(m, n) {
			break
		}
	}
	return time.Now()
}

func (f *inFlight) end(start time.Time) {
	f.busy.Add(int64(time.Since(start)))
	f.now.Add(-1)
}

// Calls runs one measured drain with an external handler.
func Calls(ctx context.Context, o CallOptions) (CallReport, error) {
	rep := CallReport{}
	if o.Concurrency <= 0 {
		o.Concurrency = spool.DefaultConcurrency
	}
	o.Procs = max(o.Procs, 1)
	rep.Ideal = float64(o.Procs*o.Concurrency) / o.Latency.Seconds()
	root, remove, err := runRoot(o.Parent, "spool-bench-", o.Keep)
	if err != nil {
		return rep, err
	}
	defer remove()
	dir := filepath.Join(root, "spool")
	gen := sample.Options{DupFrac: o.DupFrac, PoisonFrac: o.PoisonFrac, Seed: o.Seed}
	if o.Format != "" {
		rep.Expected, err = generateBatch(dir, o.N, gen, o.Format)
	} else {
		rep.Expected, err = generate(dir, o.N, gen)
	}
	if err != nil {
		return rep, err
	}
	dsn := ""
	if o.DB != "" {
		// A namespace of the run's own where --db points (a schema, a
		// database, a directory), so that each run starts empty and leaves
		// nothing behind.
		var drop func(context.Context) error
		if dsn, drop, err = ledger.Scratch(ctx, o.DB); err != nil {
			return rep, fmt.Errorf("--db: %w", err)
		}
		defer func() {
			if derr := drop(context.WithoutCancel(ctx)); derr != nil && err == nil {
				err = fmt.Errorf("bench: %w", derr)
			}
		}()
	}
	var flight inFlight
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := flight.begin()
		defer flight.end(start)
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(o.Latency) // the endpoint's latency
	}))
	defer srv.Close()
	command := "sleep " + strconv.FormatFloat(o.Latency.Seconds(), 'f', -1, 64)
	if o.Handler == "exec" {
		if rep.StartRate, err = startRate(ctx, "sleep 0", o.Concurrency, 20*o.Concurrency); err != nil {
			return rep, err
		}
	}
	if o.CPUProfile != nil {
		if err := pprof.StartCPUProfile(o.CPUProfile); err != nil {
			return rep, fmt.Errorf("bench: %w", err)
		}
	}
	start, cpu := time.Now(), cpuTime()
	if o.Procs == 1 {
		rep.Got, err = callDrain(ctx, dir, dsn, o, srv.URL, command, &flight)
	} else {
		rep.Got, err = callProcs(ctx, dir, dsn, o, srv.URL, command)
	}
	rep.Run.Elapsed = time.Since(start)
	rep.Run.CPU = cpuTime() - cpu + childCPU()
	if o.CPUProfile != nil {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return rep, err
	}
	rep.Run.N = rep.Got.Total()
	rep.Calls, rep.MaxInFlight = flight.calls.Load(), flight.max.Load()
	rep.MeanInFlight = float64(flight.busy.Load()) / float64(rep.Run.Elapsed)
	if o.Handler == "exec" && o.Procs > 1 {
		rep.Calls, rep.MaxInFlight, rep.MeanInFlight = -1, -1, -1
	}
	return rep, nil
}

// countingCaller counts the calls of an in-process consumer in flight.
type countingCaller struct {
	spool.Caller
	f *inFlight
}

func (c countingCaller) Call(ctx context.Context, d *spool.Delivery) error {
	start := c.f.begin()
	defer c.f.end(start)
	return c.Caller.Call(ctx, d)
}

func callDrain(ctx context.Context, dir, dsn string, o CallOptions, url, command string, f *inFlight) (spool.Stats, error) {
	d, err := queue.Open(dir)
	if err != nil {
		return spool.Stats{}, err
	}
	defer d.Close()
	var l *ledger.DB
	if dsn != "" {
		l, err = ledger.Open(ctx, dsn, ledger.OpenOptions{})
	} else {
		l, err = sqlite.Open(ctx, filepath.Join(dir, "ledger.db"))
	}
	if err != nil {
		return spool.Stats{}, err
	}
	defer l.Close()
	var caller spool.Caller
	if o.Handler == "exec" {
		caller = countingCaller{Caller: &handler.Exec{Command: command, Queue: dir}, f: f}
	} else {
		if caller, err = handler.NewPost(url, handler.PostOptions{Connections: o.Concurrency}); err != nil {
			return spool.Stats{}, err
		}
	}
	var files spool.BatchFiles
	if o.Format != "" {
		conf := &queueopen.Config{Format: batch.Format{Kind: o.Format}}
		if files, err = queueopen.Batch(d, conf, spool.DefaultContract()); err != nil {
			return spool.Stats{}, fmt.Errorf("bench: %w", err)
		}
	}
	c, err := spool.NewConsumer(d, l.Consumer(), spool.Config{Caller: caller, Concurrency: o.Concurrency, BatchSize: o.Batch, Batch: files})
	if err != nil {
		return spool.Stats{}, err
	}
	return c.Drain(ctx)
}

var summary = regexp.MustCompile(`(?m)^processed=(\d+) duplicates=(\d+) dead-letters=(\d+) recovered=(\d+)$`)

// callProcs runs o.Procs consumer processes at once and adds up their
// summaries.
func callProcs(ctx context.Context, dir, dsn string, o CallOptions, url, command string) (spool.Stats, error) {
	args := []string{"consume", dir, "--concurrency", strconv.Itoa(o.Concurrency)}
	if o.Handler == "exec" {
		args = append(args, "--exec", command)
	} else {
		args = append(args, "--post", url)
	}
	if o.Batch > 0 {
		args = append(args, "--batch", strconv.Itoa(o.Batch))
	}
	if dsn != "" {
		args = append(args, "--db", dsn)
	}
	// The queue's identity and the ledger's binding first: consumers
	// started at once on a queue without queue.id race to create it.
	initArgs := []string{"init", dir}
	if dsn != "" {
		initArgs = append(initArgs, "--db", dsn)
	}
	if out, err := exec.CommandContext(ctx, o.Exe, initArgs...).CombinedOutput(); err != nil {
		return spool.Stats{}, fmt.Errorf("bench: spool init: %v: %s", err, out)
	}
	var st spool.Stats
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, o.Procs)
	for i := range o.Procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out, errb bytes.Buffer
			cmd := exec.CommandContext(ctx, o.Exe, args...)
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Errorf("bench: consumer %d: %v: %s", i+1, err, errb.String())
				return
			}
			m := summary.FindStringSubmatch(out.String())
			if m == nil {
				errs[i] = fmt.Errorf("bench: consumer %d printed no summary: %s", i+1, out.String())
				return
			}
			n := func(j int) int { v, _ := strconv.Atoi(m[j]); return v }
			mu.Lock()
			st.Processed += n(1)
			st.Duplicates += n(2)
			st.DeadLetters += n(3)
			st.Recovered += n(4)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return st, err
		}
	}
	return st, nil
}

// startRate measures how many times a second this machine runs /bin/sh -c
// command, n runs, conc at once: the most an --exec consumer can call it.
func startRate(ctx context.Context, command string, conc, n int) (float64, error) {
	var wg sync.WaitGroup
	var next atomic.Int64
	var failed atomic.Value
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := exec.CommandContext(ctx, "/bin/sh", "-c", command).Run(); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return 0, fmt.Errorf("bench: start /bin/sh: %w", err)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// childCPU is the user and system time of the waited-for child processes.
func childCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package queueopen

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/batch"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/replay"
)

// DefaultLedger is the name of the ledger file a queue keeps in its own
// directory, used when Options.DB is empty. spool init creates it there.
const DefaultLedger = "ledger.db"

// Use says what the caller does with the ledger, which decides what
// opening it may create and bind (docs/DESIGN.md, "Queue identity").
type Use int

const (
	// Read is for reports and checks. The ledger must exist: nothing is
	// created, migrated into an empty database, or bound.
	Read Use = iota
	// Write is for programs that record (spool init, replay, a demo). A
	// ledger is created and bound to the queue only when the queue has no
	// history (nothing in done/ or error/), or on purpose with
	// Options.NewLedger.
	Write
	// Consume is Write followed by Start: before Open returns, the
	// replays a killed run left unfinished are finished and stale temp
	// files removed, so the queue is ready for a consumer to claim from.
	Consume
)

// Options say which ledger to open and what for. The zero value opens
// the queue's own DIR/ledger.db for reading.
type Options struct {
	// DB names the ledger: "" for DefaultLedger in the queue's directory,
	// an SQLite file path or sqlite:PATH, or a URL of a registered backend
	// (postgres://...). A libpq keyword/value string ("host=... dbname=...")
	// is refused with ErrKeywordDSN rather than taken for a file name.
	DB string
	// Use is what the ledger is opened for.
	Use Use
	// ReadOnly, with Read, opens the ledger for reading only
	// (ledger.OpenOptions.ReadOnly): for reports run by a user who may
	// read the queue and its ledger but not write them.
	ReadOnly bool
	// Relaxed asks a backend that can for commits that are not fsynced
	// (ledger.OpenOptions.Relaxed); a crash still loses nothing, a power
	// cut may lose the last batches.
	Relaxed bool
	// NewLedger accepts, for Write and Consume, a missing or empty ledger
	// for a queue whose done/ or error/ holds messages: the operator starts
	// a new ledger on purpose, and redeliveries of old messages will be
	// processed again.
	NewLedger bool
	// Audit, when its Actor is set, is who opens the queue for Write or
	// Consume: a first bind of the ledger to the queue, or a new ledger
	// accepted with NewLedger, is then audited as theirs
	// (ledger.BindAudited).
	Audit ledger.AuditEntry
	// OnReplayFinished, if set, is called by Start for each replay it
	// finished that a killed run had left unfinished.
	OnReplayFinished func(replay.Finished)
	// OnTempRemoved, if set, is called by Start for each stale temp file
	// of a killed writer that it removed.
	OnTempRemoved func(queue.Temp)
	// Override changes, for Open, the contract the queue's spool.conf
	// gives (LoadContract); the zero value keeps it.
	Override Override
}

// ErrKeywordDSN is wrapped by Open, Attach and OpenLedger for an
// Options.DB in libpq's keyword/value form: taken as a file name, it
// would quietly give this host a ledger of its own, and consumers meant to
// share one would not.
var ErrKeywordDSN = errors.New("looks like a PostgreSQL keyword/value connection string; give a postgres:// URL")

// Queue is a queue directory open with its ledger, checked to belong
// together, and the contract its messages are read with. Dir and Ledger
// are the caller's to use; Close closes them.
type Queue struct {
	Dir    *queue.Dir
	Ledger *ledger.DB
	// Name is the ledger as a person names it (LedgerName).
	Name string
	// Contract is the queue's contract: its spool.conf, then
	// Options.Override, checked (LoadContract). For Consume it is held
	// among the live consumers' until Close.
	Contract spool.Contract
	// Config is the queue's spool.conf as read; nil when it has none.
	Config *Config

	hold *queue.ContractHold // for Consume
}

// Close closes the ledger and then the queue, gives up the contract's
// hold, and returns the errors of all.
func (q *Queue) Close() error {
	var errs []error
	if q.hold != nil {
		if err := q.hold.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := q.Ledger.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close ledger: %w", err))
	}
	if err := q.Dir.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close queue: %w", err))
	}
	return errors.Join(errs...)
}

// Open opens the queue at dir for any program, in one call: it reads the
// queue's spool.conf strictly (LoadContract, with o.Override), opens and
// checks the ledger (Attach), and, for Consume, holds the contract among
// the live consumers' (HoldContract, refused with a *ContractError when
// consumers alive run another) before Start finishes what killed runs
// left. A directory that does not exist is not a queue
// (queue.ErrNotQueue); a spool.conf that cannot be used is a
// *ConfigError. On error nothing is left open or held.
func Open(ctx context.Context, dir string, o Options) (*Queue, error) {
	d, err := queue.Open(dir)
	if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, queue.ErrNotQueue) {
		return nil, fmt.Errorf("open queue %s: %w: no such directory", dir, queue.ErrNotQueue)
	}
	if err != nil {
		return nil, err
	}
	q := &Queue{Dir: d, Name: LedgerName(dir, o.DB)}
	if err := q.attach(ctx, dir, o); err != nil {
		if q.hold != nil {
			_ = q.hold.Close() // the error that matters is the first
		}
		_ = d.Close()
		return nil, err
	}
	return q, nil
}

// attach reads q's contract, holds it for Consume, and opens its ledger.
func (q *Queue) attach(ctx context.Context, dir string, o Options) (err error) {
	if q.Contract, q.Config, err = LoadContract(dir, o.Override); err != nil {
		return err
	}
	UseFormat(q.Dir, q.Config)
	if o.Use == Consume {
		var f batch.Format
		if q.Config != nil {
			f = q.Config.Format
		}
		if q.hold, err = HoldContract(q.Dir, q.Contract, f); err != nil {
			return err
		}
	}
	q.Ledger, err = Attach(ctx, q.Dir, o)
	return err
}

// Attach opens the ledger of the queue d, which the caller has opened and
// still owns, and checks that the two belong together (ledger.Bind),
// binding them when o.Use allows. For Consume it then runs Start. The
// ledger is the caller's to close.
//
// A refusal is a *LedgerError and changes nothing: a missing SQLite file
// is not created, an empty one or a PostgreSQL schema is not given the
// ledger's tables, and another SQLite database is not switched to WAL
// mode. A writer of a queue with history (files in done/ or error/) needs
// the ledger that recorded it, unless o.NewLedger. Other failures (an
// unreadable file, a server that is down) are returned as the backend
// gives them.
func Attach(ctx context.Context, d *queue.Dir, o Options) (*ledger.DB, error) {
	if err := checkDSN(o.DB); err != nil {
		return nil, err
	}
	dir := d.Path()
	where := LedgerName(dir, o.DB)
	// A writer of a queue with history, unless told NewLedger, needs the
	// ledger that recorded it: it must not create one, an empty SQLite
	// file or a PostgreSQL schema without tables.
	history := false
	if o.Use != Read && !o.NewLedger {
		has, err := d.HasHistory()
		if err != nil {
			return nil, err
		}
		history = has
	}
	refusal := ledger.ErrNoLedger
	if history {
		refusal = ledger.ErrNewLedger
	}
	if path, ok := SQLiteFile(dir, o.DB); ok && (o.Use == Read || history) {
		if f := fileState(path); f != FoundLedger {
			return nil, &LedgerError{Ledger: where, Queue: dir, Found: f, Err: refusal}
		}
	}
	// With history the ledger must exist already (it is still migrated):
	// MustExist also keeps a backend from changing a database that holds
	// no ledger (ledger/sqlite leaves its journal mode alone).
	l, err := ledger.Open(ctx, dsn(dir, o.DB), ledger.OpenOptions{Relaxed: o.Relaxed, MustExist: o.Use == Read || history, ReadOnly: o.ReadOnly && o.Use == Read})
	if errors.Is(err, ledger.ErrNoLedger) {
		return nil, &LedgerError{Ledger: where, Queue: dir, Found: NotLedger, Err: refusal, cause: err}
	}
	if err != nil {
		return nil, err
	}
	mode := ledger.BindCheck
	switch {
	case o.Use != Read && o.NewLedger:
		mode = ledger.BindNew
	case o.Use != Read:
		mode = ledger.BindWrite
	}
	if _, err := ledger.BindAudited(ctx, l, d, mode, o.Audit); err != nil {
		_ = l.Close() // the error that matters is the refusal
		for _, refusal := range bindRefusals {
			if errors.Is(err, refusal) {
				return nil, &LedgerError{Ledger: where, Queue: dir, Found: BindRefused, Err: err}
			}
		}
		return nil, err
	}
	if o.Use == Consume {
		if err := Start(ctx, d, l, o); err != nil {
			_ = l.Close() // the error that matters is Start's
			return nil, err
		}
	}
	return l, nil
}

// bindRefusals are the errors of ledger.Bind that refuse the pair, as
// opposed to failing to read it.
var bindRefusals = []error{ledger.ErrOtherQueue, ledger.ErrNewLedger, ledger.ErrRebuilding, ledger.ErrNoQueueID, queue.ErrBadID}

// OpenLedger opens the ledger o names for the queue at dir without
// checking that the two belong together: for spool fsck, which reports
// and repairs exactly that. For Read the ledger must exist (an error
// wrapping ledger.ErrNoLedger otherwise, nothing created); for Write and
// Consume it is created if needed. The ledger is the caller's to close.
func OpenLedger(ctx context.Context, dir string, o Options) (*ledger.DB, error) {
	if err := checkDSN(o.DB); err != nil {
		return nil, err
	}
	return ledger.Open(ctx, dsn(dir, o.DB), ledger.OpenOptions{Relaxed: o.Relaxed, MustExist: o.Use == Read, ReadOnly: o.ReadOnly && o.Use == Read})
}

// Start does what a consumer's start must before it claims: it finishes
// the replays a killed run left unfinished (their files must reach inbox/
// before anything is claimed, so that none is consumed while its replay
// is unrecorded), then removes the stale temp files of killed writers. It
// reports each through o's callbacks, also those done before an error.
// It takes the queue's replay lock only when a replay is unfinished, so a
// start that has nothing to finish writes nothing in error/.
func Start(ctx context.Context, d *queue.Dir, l *ledger.DB, o Options) error {
	intents, err := l.Replays().Unfinished(ctx)
	if err != nil {
		return fmt.Errorf("start queue %s: %w", d.Path(), err)
	}
	if len(intents) > 0 {
		fin, err := replay.Resume(ctx, d, l)
		if o.OnReplayFinished != nil {
			for _, f := range fin {
				o.OnReplayFinished(f)
			}
		}
		if err != nil {
			return err
		}
	}
	removed, err := d.RemoveStaleTemps()
	if o.OnTempRemoved != nil {
		for _, t := range removed {
			o.OnTempRemoved(t)
		}
	}
	return err
}

// SQLiteFile returns the SQLite file that db names for the queue at dir
// (a path, sqlite:PATH, or DefaultLedger in dir when db is empty), or
// false when db is the URL of another registered backend.
func SQLiteFile(dir, db string) (string, bool) {
	if path, ok := strings.CutPrefix(db, "sqlite:"); ok {
		return path, true
	}
	if ledger.HasScheme(db) {
		return "", false
	}
	return dsn(dir, db), true
}

// LedgerName is the ledger db names for the queue at dir as a person
// names it, in messages: the SQLite file's path (SQLiteFile), or db as
// given for another backend.
func LedgerName(dir, db string) string {
	if path, ok := SQLiteFile(dir, db); ok {
		return path
	}
	return db
}

// dsn is the ledger db names for the queue at dir as ledger.Open takes
// it: db itself, or DefaultLedger in dir when db is empty.
func dsn(dir, db string) string {
	if db != "" {
		return db
	}
	return filepath.Join(dir, DefaultLedger)
}

// checkDSN refuses a keyword/value DSN before it is taken for a file name.
func checkDSN(db string) error {
	if !ledger.HasScheme(db) && isKeywordDSN(db) {
		return fmt.Errorf("ledger %q: %w", db, ErrKeywordDSN)
	}
	return nil
}

// isKeywordDSN reports whether db reads as libpq's keyword/value form
// ("host=... dbname=..."), which no SQLite path a user means does.
func isKeywordDSN(db string) bool {
	for _, f := range strings.Fields(db) {
		k, _, ok := strings.Cut(f, "=")
		switch k {
		case "host", "hostaddr", "port", "dbname", "user", "sslmode":
			if ok {
				return true
			}
		}
	}
	return false
}

// fileState says whether the SQLite file at path is there to be opened:
// FoundLedger for a file with content, or anything the open will name itself.
func fileState(path string) Found {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return NoFile
	case err == nil && fi.Mode().IsRegular() && fi.Size() == 0:
		return EmptyFile
	}
	return FoundLedger
}

// Init creates the queue at dir, or completes one (queue.Init: its
// stages; running it again on a queue is harmless), and gives a new queue
// its identity (queue.id) now, so that a ledger that already belongs to
// another queue is refused as such; a queue with history that lost its
// queue.id gets none, for its ledger may know the old one. It then
// creates or checks the ledger o names (Attach, o.Use being Write),
// bound to the queue, and closes it. It returns the queue open, its
// message names those of its spool.conf's format when one can be read
// (UseFormat); the caller closes it.
func Init(ctx context.Context, dir string, o Options) (*queue.Dir, error) {
	if err := queue.Init(dir); err != nil {
		return nil, err
	}
	d, err := queue.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := initQueue(ctx, d, o); err != nil {
		_ = d.Close() // the error that matters is the first
		return nil, err
	}
	return d, nil
}

// initQueue is Init's work on the queue d, open.
func initQueue(ctx context.Context, d *queue.Dir, o Options) error {
	if conf, err := ReadConfig(d.Path()); err == nil {
		UseFormat(d, conf)
	}
	if has, err := d.HasHistory(); err != nil {
		return err
	} else if !has {
		if _, err := d.EnsureID(); err != nil {
			return err
		}
	}
	l, err := Attach(ctx, d, o)
	if err != nil {
		return err
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("close ledger: %w", err)
	}
	return nil
}

// urlSchemeRe matches a DSN written as a URL: scheme://...
var urlSchemeRe = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

// CheckDBName refuses, as the command line reads --db, what can never
// name a ledger: an empty name (which would quietly mean the default
// file) and a URL whose scheme no registered backend has (which would be
// taken for a file path and create a file of that name).
func CheckDBName(s string) error {
	if s == "" {
		return errors.New("empty: give a file path, sqlite:PATH or a postgres:// URL, or leave --db out for DIR/" + DefaultLedger)
	}
	if m := urlSchemeRe.FindStringSubmatch(s); m != nil && !ledger.HasScheme(s) {
		var known []string
		for _, k := range ledger.Schemes() {
			if k != ledger.FileScheme {
				known = append(known, k+"://")
			}
		}
		return fmt.Errorf("unknown scheme %q: want %s, sqlite:PATH or a file path", m[1], strings.Join(known, ", "))
	}
	return nil
}

package ledger

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// OpenOptions are what a caller of Open may ask of any backend. The zero
// value is the durable default.
type OpenOptions struct {
	// Relaxed lets a backend that can trade the durability of the last
	// commits before a power cut for throughput do so (SQLite: a commit is
	// not fsynced; a crash of the process still loses nothing). A backend
	// that cannot ignores it: a PostgreSQL server decides its own
	// durability, and ledger/postgres refuses one that is not durable.
	Relaxed bool
	// MustExist refuses a database that holds no ledger yet (ErrNoLedger)
	// instead of creating one: for reports, which must never leave an empty
	// ledger behind a mistyped address.
	MustExist bool
	// ReadOnly asks for a ledger opened for reading only, by a user who
	// may not write it (reports): it must exist and be up to date, and
	// nothing is created or changed. A backend whose server decides
	// access (PostgreSQL) needs no more than MustExist for it.
	ReadOnly bool
}

// OpenFunc opens the ledger that dsn names, creating its schema if
// needed, as a backend's own Open does. It is given the whole DSN, scheme
// included.
type OpenFunc func(ctx context.Context, dsn string, o OpenOptions) (*DB, error)

// ScratchFunc makes an empty namespace for a ledger where the DSN dsn
// points, of the kind its engine has: a schema on dsn's PostgreSQL
// database, a database on dsn's MariaDB server, a directory beside dsn's
// SQLite file. It returns the DSN of a ledger in that namespace, which Open
// then creates, and a func that removes the namespace with all it holds;
// drop must be called once the ledgers opened on it are closed. dsn itself
// is left as it is. For benchmarks and tests, which each want a ledger of
// their own on a server they are given.
type ScratchFunc func(ctx context.Context, dsn string) (scratch string, drop func(context.Context) error, err error)

// Backend is what a backend package registers for its scheme.
type Backend struct {
	// Open opens the ledger a DSN of the scheme names. Required.
	Open OpenFunc
	// Scratch makes a namespace of the backend's own for a ledger (see
	// ScratchFunc). Nil when the backend has none: Scratch then fails.
	Scratch ScratchFunc
}

// FileScheme is the scheme of the backend that Open gives a DSN with no
// registered scheme, which is then a file path; it is written SCHEME:PATH,
// not as a URL.
const FileScheme = "sqlite"

var backends = struct {
	sync.RWMutex
	by map[string]Backend
}{by: map[string]Backend{}}

// Register makes a backend available to Open and Scratch for the DSNs that
// begin with scheme and a colon: "postgres" for postgres://... A scheme is
// matched exactly, in lower case. Backend packages register themselves
// when imported (ledger/sqlite as "sqlite", ledger/postgres as "postgres"
// and "postgresql", ledger/mysql as "mysql"). Register panics when b.Open
// is nil or scheme is already registered, as database/sql.Register does.
func Register(scheme string, b Backend) {
	if b.Open == nil {
		panic("ledger: Register " + scheme + ": nil OpenFunc")
	}
	if scheme == "" || strings.ContainsAny(scheme, ":/") {
		panic(fmt.Sprintf("ledger: Register %q: not a URL scheme", scheme))
	}
	backends.Lock()
	defer backends.Unlock()
	if _, dup := backends.by[scheme]; dup {
		panic("ledger: Register " + scheme + " twice")
	}
	backends.by[scheme] = b
}

// lookup returns the backend registered for dsn's scheme, if any.
func lookup(dsn string) (Backend, bool) {
	scheme, _, ok := strings.Cut(dsn, ":")
	if !ok {
		return Backend{}, false
	}
	backends.RLock()
	defer backends.RUnlock()
	b, ok := backends.by[scheme]
	return b, ok
}

// backendOf returns the backend for dsn: the one registered for its
// scheme, or, for a dsn that begins with none, the file backend's.
func backendOf(dsn string) (Backend, error) {
	if b, ok := lookup(dsn); ok {
		return b, nil
	}
	backends.RLock()
	b, ok := backends.by[FileScheme]
	backends.RUnlock()
	if !ok {
		return Backend{}, fmt.Errorf("ledger %s: no backend for a file path (import github.com/spoolq/spool/ledger/sqlite)", dsn)
	}
	return b, nil
}

// HasScheme reports whether dsn begins with the scheme of a registered
// backend, which Open then gives it to, rather than take dsn for the path
// of an SQLite file.
func HasScheme(dsn string) bool {
	_, ok := lookup(dsn)
	return ok
}

// Open opens the ledger dsn names with the backend registered for its
// scheme: postgres://... and postgresql://... with ledger/postgres,
// mysql://... with ledger/mysql, sqlite:PATH with ledger/sqlite. A dsn
// that begins with no registered scheme is the path of an SQLite file,
// opened by the backend registered as "sqlite". The backend's package must
// have been imported (for its registration alone, import it as _); Open
// fails otherwise.
func Open(ctx context.Context, dsn string, o OpenOptions) (*DB, error) {
	b, err := backendOf(dsn)
	if err != nil {
		return nil, fmt.Errorf("open %w", err)
	}
	return b.Open(ctx, dsn, o)
}

// Scratch makes an empty namespace for a ledger where dsn points, with the
// backend Open would give dsn to, and returns the DSN of a ledger in it
// and the func that removes it (see ScratchFunc).
func Scratch(ctx context.Context, dsn string) (string, func(context.Context) error, error) {
	b, err := backendOf(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("scratch %w", err)
	}
	if b.Scratch == nil {
		return "", nil, fmt.Errorf("scratch ledger %s: its backend makes no scratch namespace", dsn)
	}
	return b.Scratch(ctx, dsn)
}

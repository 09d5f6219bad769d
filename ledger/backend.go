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

// FileScheme is the scheme of the backend that Open gives a DSN with no
// registered scheme, which is then a file path; it is written SCHEME:PATH,
// not as a URL.
const FileScheme = "sqlite"

var backends = struct {
	sync.RWMutex
	open map[string]OpenFunc
}{open: map[string]OpenFunc{}}

// Register makes a backend available to Open for the DSNs that begin with
// scheme and a colon: "postgres" for postgres://... A scheme is matched
// exactly, in lower case. Backend packages register themselves when
// imported (ledger/sqlite as "sqlite", ledger/postgres as "postgres" and
// "postgresql"). Register panics when open is nil or scheme is already
// registered, as database/sql.Register does.
func Register(scheme string, open OpenFunc) {
	if open == nil {
		panic("ledger: Register " + scheme + ": nil OpenFunc")
	}
	if scheme == "" || strings.ContainsAny(scheme, ":/") {
		panic(fmt.Sprintf("ledger: Register %q: not a URL scheme", scheme))
	}
	backends.Lock()
	defer backends.Unlock()
	if _, dup := backends.open[scheme]; dup {
		panic("ledger: Register " + scheme + " twice")
	}
	backends.open[scheme] = open
}

// lookup returns the backend registered for dsn's scheme, if any.
func lookup(dsn string) (OpenFunc, bool) {
	scheme, _, ok := strings.Cut(dsn, ":")
	if !ok {
		return nil, false
	}
	backends.RLock()
	defer backends.RUnlock()
	open, ok := backends.open[scheme]
	return open, ok
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
// sqlite:PATH with ledger/sqlite. A dsn that begins with no registered
// scheme is the path of an SQLite file, opened by the backend registered as
// "sqlite". The backend's package must have been imported (for its
// registration alone, import it as _); Open fails otherwise.
func Open(ctx context.Context, dsn string, o OpenOptions) (*DB, error) {
	open, ok := lookup(dsn)
	if !ok {
		backends.RLock()
		open, ok = backends.open[FileScheme]
		backends.RUnlock()
		if !ok {
			return nil, fmt.Errorf("open ledger %s: no backend for a file path (import github.com/spoolq/spool/ledger/sqlite)", dsn)
		}
	}
	return open(ctx, dsn, o)
}

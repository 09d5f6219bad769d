package postgres

import (
	"context"

	"github.com/spoolq/spool/ledger"
)

// Scheme is the DSN scheme under which this package registers itself with
// ledger.Open, together with its alias "postgresql": a postgres:// or
// postgresql:// URL opens the database it names, as Open does. A
// keyword/value DSN has no scheme; open it with Open. ledger.OpenOptions'
// Relaxed is ignored: the server decides its own durability, and Open
// refuses one that is not durable; MustExist is Options'. ledger.Scratch
// makes a schema (Scratch).
const Scheme = "postgres"

func init() {
	for _, s := range []string{Scheme, "postgresql"} {
		ledger.Register(s, ledger.Backend{
			Open: func(ctx context.Context, dsn string, o ledger.OpenOptions) (*ledger.DB, error) {
				return OpenWith(ctx, dsn, Options{MustExist: o.MustExist})
			},
			Scratch: Scratch,
		})
	}
}

package mysql

import (
	"context"

	"github.com/spoolq/spool/ledger"
)

// Scheme is the DSN scheme under which this package registers itself with
// ledger.Open: mysql://USER[:PASS]@HOST[:PORT]/DB[?PARAMS] opens the
// database it names, as Open does. ledger.OpenOptions' Relaxed is ignored:
// the server decides its own durability, and Open refuses one that is not
// durable; MustExist and ReadOnly are Options'. ledger.Scratch makes a
// database (Scratch).
const Scheme = "mysql"

func init() {
	ledger.Register(Scheme, ledger.Backend{
		Open: func(ctx context.Context, dsn string, o ledger.OpenOptions) (*ledger.DB, error) {
			return OpenWith(ctx, dsn, Options{MustExist: o.MustExist || o.ReadOnly, ReadOnly: o.ReadOnly})
		},
		Scratch: Scratch,
	})
}

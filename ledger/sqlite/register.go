package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/spoolq/spool/ledger"
)

// Scheme is the DSN scheme under which this package registers itself with
// ledger.Open: "sqlite:PATH" opens the file at PATH, taken as it is written
// (no URL decoding, so '%', '?' and '#' in it mean themselves), as does a
// plain PATH that begins with no registered scheme. ledger.OpenOptions'
// Relaxed and MustExist are Options'.
const Scheme = "sqlite"

func init() { ledger.Register(Scheme, openDSN) }

func openDSN(ctx context.Context, dsn string, o ledger.OpenOptions) (*ledger.DB, error) {
	path := strings.TrimPrefix(dsn, Scheme+":")
	if path == "" {
		return nil, fmt.Errorf("open ledger %q: no file path", dsn)
	}
	return OpenWith(ctx, path, Options{Relaxed: o.Relaxed, MustExist: o.MustExist, ReadOnly: o.ReadOnly})
}

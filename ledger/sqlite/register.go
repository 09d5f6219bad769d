package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spoolq/spool/ledger"
)

// Scheme is the DSN scheme under which this package registers itself with
// ledger.Open: "sqlite:PATH" opens the file at PATH, taken as it is written
// (no URL decoding, so '%', '?' and '#' in it mean themselves), as does a
// plain PATH that begins with no registered scheme. ledger.OpenOptions'
// Relaxed and MustExist are Options'. ledger.Scratch makes a directory
// (Scratch).
const Scheme = "sqlite"

func init() { ledger.Register(Scheme, ledger.Backend{Open: openDSN, Scratch: Scratch}) }

// pathOf is the file path of a DSN: sqlite:PATH, or PATH.
func pathOf(dsn string) (string, error) {
	path := strings.TrimPrefix(dsn, Scheme+":")
	if path == "" {
		return "", fmt.Errorf("ledger %q: no file path", dsn)
	}
	return path, nil
}

func openDSN(ctx context.Context, dsn string, o ledger.OpenOptions) (*ledger.DB, error) {
	path, err := pathOf(dsn)
	if err != nil {
		return nil, fmt.Errorf("open %w", err)
	}
	return OpenWith(ctx, path, Options{Relaxed: o.Relaxed, MustExist: o.MustExist, ReadOnly: o.ReadOnly})
}

// Scratch creates an empty directory of its own beside the file dsn names
// (which need not exist) and returns the DSN of a file in it, and a func
// that removes the directory with all it holds (ledger.ScratchFunc). ctx
// is unused: nothing here waits.
func Scratch(_ context.Context, dsn string) (string, func(context.Context) error, error) {
	path, err := pathOf(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("scratch %w", err)
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), "spool-scratch-")
	if err != nil {
		return "", nil, fmt.Errorf("scratch sqlite ledger: %w", err)
	}
	drop := func(context.Context) error {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("drop scratch directory: %w", err)
		}
		return nil
	}
	return Scheme + ":" + filepath.Join(dir, "ledger.db"), drop, nil
}

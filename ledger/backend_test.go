package ledger_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/spoolq/spool/ledger"
	_ "github.com/spoolq/spool/ledger/postgres"
	"github.com/spoolq/spool/ledger/sqlite"
)

func TestHasScheme(t *testing.T) {
	for dsn, want := range map[string]bool{
		"postgres://spool@db/queue":   true,
		"postgresql://spool@db/queue": true,
		"postgres:queue":              true,
		"sqlite:ledger.db":            true,
		"sqlite:/var/lib/spool/l.db":  true,
		"ledger.db":                   false,
		"/var/lib/spool/ledger.db":    false,
		"notes:2024.db":               false, // a file name with a colon
		"POSTGRES://spool@db/queue":   false, // schemes match in lower case, as before
		"host=db dbname=queue":        false,
		"":                            false,
	} {
		if got := ledger.HasScheme(dsn); got != want {
			t.Errorf("HasScheme(%q) = %v, want %v", dsn, got, want)
		}
	}
}

func TestOpenSQLiteByPathOrScheme(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ dsn, file string }{
		{filepath.Join(dir, "plain.db"), "plain.db"},
		{"sqlite:" + filepath.Join(dir, "schemed.db"), "schemed.db"},
		{"sqlite:" + filepath.Join(dir, "odd?name#1%.db"), "odd?name#1%.db"},
	} {
		db, err := ledger.Open(t.Context(), c.dsn, ledger.OpenOptions{})
		if err != nil {
			t.Fatalf("Open(%q): %v", c.dsn, err)
		}
		if got, want := db.Dialect().Name(), sqlite.Dialect().Name(); got != want {
			t.Errorf("Open(%q): dialect %s, want %s", c.dsn, got, want)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, c.file)); err != nil {
			t.Errorf("Open(%q) made no file %s: %v", c.dsn, c.file, err)
		}
	}
	if _, err := ledger.Open(t.Context(), "sqlite:", ledger.OpenOptions{}); err == nil {
		t.Error(`Open("sqlite:") succeeded, want an error for the missing path`)
	}
}

func TestRegister(t *testing.T) {
	errFake := errors.New("fake backend")
	var got struct {
		dsn string
		o   ledger.OpenOptions
	}
	ledger.Register("spooltest", ledger.Backend{Open: func(_ context.Context, dsn string, o ledger.OpenOptions) (*ledger.DB, error) {
		got.dsn, got.o = dsn, o
		return nil, errFake
	}})
	const dsn = "spooltest://somewhere/x?y=1"
	if _, err := ledger.Open(t.Context(), dsn, ledger.OpenOptions{Relaxed: true}); !errors.Is(err, errFake) {
		t.Fatalf("Open(%q) = %v, want the registered backend's error", dsn, err)
	}
	if got.dsn != dsn || !got.o.Relaxed {
		t.Errorf("backend got (%q, %+v), want the whole DSN and the options", got.dsn, got.o)
	}
	for _, c := range []struct {
		name   string
		scheme string
		open   ledger.OpenFunc
	}{
		{"twice", "spooltest", func(context.Context, string, ledger.OpenOptions) (*ledger.DB, error) { return nil, nil }},
		{"nil", "spooltest2", nil},
		{"empty scheme", "", func(context.Context, string, ledger.OpenOptions) (*ledger.DB, error) { return nil, nil }},
		{"not a scheme", "x://", func(context.Context, string, ledger.OpenOptions) (*ledger.DB, error) { return nil, nil }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register %s did not panic", c.name)
				}
			}()
			ledger.Register(c.scheme, ledger.Backend{Open: c.open})
		}()
	}
}

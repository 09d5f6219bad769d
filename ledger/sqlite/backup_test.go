package sqlite_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/ledger/sqlite"
)

// TestCheckBackupTarget: the live ledger and its side files are refused
// whatever force says, through a symlink too; a directory is refused; an
// existing file only without force; a new name passes.
func TestCheckBackupTarget(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "ledger.db")
	for _, name := range []string{"ledger.db", "ledger.db-wal", "old.db"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(live, filepath.Join(dir, "link.db")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		to    string
		force bool
		want  string // "" for accepted
	}{
		{"ledger.db", true, "is the live ledger ("},
		{"link.db", true, "is the live ledger ("},
		{"ledger.db-wal", true, "is the live ledger's wal file"},
		{".", true, "is not a regular file"},
		{"old.db", false, "exists: give a new name"},
		{"old.db", true, ""},
		{"new.db", false, ""},
	} {
		err := sqlite.CheckBackupTarget(filepath.Join(dir, tt.to), live, tt.force)
		var te *sqlite.TargetError
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s (force %v): %v, want accepted", tt.to, tt.force, err)
		case tt.want != "" && (!errors.As(err, &te) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s (force %v): %v, want a *TargetError saying %q", tt.to, tt.force, err, tt.want)
		}
	}
}

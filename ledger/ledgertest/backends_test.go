package ledgertest_test

import (
	"io/fs"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/mysql"
	"github.com/spoolq/spool/ledger/postgres"
	"github.com/spoolq/spool/ledger/sqlite"
)

// dialects are the backends whose migrations must stay in step: register a
// new backend's dialect here.
var dialects = []ledger.Dialect{sqlite.Dialect(), postgres.Dialect(), mysql.Dialect()}

// TestMigrationsInStep: every engine has the same migrations, numbered from
// 1 without gaps, so a schema change cannot be made on one and forgotten on
// another.
func TestMigrationsInStep(t *testing.T) {
	var first []string
	for i, d := range dialects {
		files, err := fs.Glob(d.Migrations(), "*.up.sql")
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: migrations %q, %v", d.Name(), files, err)
		}
		var names []string
		for k, f := range files {
			num, _, _ := strings.Cut(f, "_")
			if v, err := strconv.Atoi(num); err != nil || v != k+1 {
				t.Errorf("%s: migration %s, want version %d (from 1, no gaps)", d.Name(), f, k+1)
			}
			names = append(names, strings.TrimSuffix(f, ".up.sql"))
		}
		if i == 0 {
			first = names
		} else if !reflect.DeepEqual(names, first) {
			t.Errorf("migrations differ: %s %q, %s %q", dialects[0].Name(), first, d.Name(), names)
		}
	}
}

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
// 1 in increasing order, so a schema change cannot be made on one and
// forgotten on another. Numbers may skip: they are assigned to changes
// made side by side, and one assigned may land after a later one.
func TestMigrationsInStep(t *testing.T) {
	var first []string
	for i, d := range dialects {
		files, err := fs.Glob(d.Migrations(), "*.up.sql")
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: migrations %q, %v", d.Name(), files, err)
		}
		var names []string
		last := 0
		for _, f := range files {
			num, _, _ := strings.Cut(f, "_")
			v, err := strconv.Atoi(num)
			if err != nil || v <= last {
				t.Errorf("%s: migration %s, want a version above %d", d.Name(), f, last)
			}
			last = v
			names = append(names, strings.TrimSuffix(f, ".up.sql"))
		}
		if i == 0 {
			first = names
		} else if !reflect.DeepEqual(names, first) {
			t.Errorf("migrations differ: %s %q, %s %q", dialects[0].Name(), first, d.Name(), names)
		}
	}
}

package spool

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/spoolq/spool/internal/testenv"
)

// Parse against the public JSONTestSuite conformance corpus, read from a
// directory beside the repository when it is there (required on CI).

// suiteDir is the JSONTestSuite corpus, relative to the repository root.
var suiteDir = filepath.Join("..", "shared", "testdata", "JSONTestSuite", "test_parsing")

func suiteFiles(tb testing.TB) []string {
	files, err := filepath.Glob(filepath.Join(suiteDir, "*.json"))
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

// TestJSONTestSuite runs Parse over every case of JSONTestSuite and checks
// the scanner's verdict against encoding/json's.
func TestJSONTestSuite(t *testing.T) {
	files := suiteFiles(t)
	if len(files) == 0 {
		msg := "JSONTestSuite not found in " + suiteDir + " (see ../shared/testdata/JSONTestSuite/ABOUT.md)"
		testenv.Missing(t, msg)
	}
	c := DefaultContract()
	var counts = map[string]int{}
	for _, file := range files {
		name := filepath.Base(file)
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.Parse(data)
		var re *RejectError
		if err != nil && !errors.As(err, &re) {
			t.Errorf("%s: error %T %v is not a RejectError", name, err, err)
			continue
		}
		if m != nil {
			// No suite case carries a msg_id, so none can be valid.
			t.Errorf("%s: accepted as a message: %+v", name, m)
			continue
		}
		kind, _, scanErr := checkJSON(data)
		switch name[:2] {
		case "n_":
			if re.Reason != ReasonParse {
				t.Errorf("%s: %v, want %s", name, re, ReasonParse)
			}
			if scanErr == "" {
				t.Errorf("%s: scanner accepts an invalid text", name)
			}
		case "y_":
			if scanErr != "" {
				t.Errorf("%s: scanner rejects a valid text: %s", name, scanErr)
			}
			wantParse := kind != KindObject
			if (re.Reason == ReasonParse) != wantParse {
				t.Errorf("%s (%s): %v; want parse only for a non-object", name, kind, re)
			}
		case "i_":
			t.Logf("%s: %v", name, re)
		default:
			t.Errorf("%s: unknown prefix", name)
			continue
		}
		counts[name[:2]]++
		if name[:2] == "i_" {
			continue
		}
		// Cross-check the syntax verdict with encoding/json.
		if got, ref := scanErr == "", json.Valid(data); got != ref {
			if !utf8.Valid(data) && !got {
				t.Logf("%s: known difference, encoding/json accepts invalid UTF-8 in strings: %s", name, scanErr)
			} else {
				t.Errorf("%s: scanner valid=%v (%s), json.Valid=%v", name, got, scanErr, ref)
			}
		}
	}
	t.Logf("JSONTestSuite: %d y_, %d n_, %d i_ cases", counts["y_"], counts["n_"], counts["i_"])
	if counts["y_"] == 0 || counts["n_"] == 0 {
		t.Errorf("suite incomplete: %v", counts)
	}
}

package report

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
)

// TestWriteStoryBatchFile: a batch file's story names it as one, gives
// its records' counts and its first dead letters, and says how many more
// there are and where to list them.
func TestWriteStoryBatchFile(t *testing.T) {
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	f := ledger.BatchFileStory{BatchFile: ledger.BatchFile{Name: "orders.csv", Processed: 90, Duplicates: 1, DeadLetters: 12, At: at}}
	for i := range storyDeadLetters {
		f.DeadLetterFiles = append(f.DeadLetterFiles, "orders~L"+strconv.Itoa(i+2)+".csv")
	}
	var b strings.Builder
	if err := WriteStory(&b, MessageStory{Query: "orders.csv", BatchFiles: []ledger.BatchFileStory{f}}, at); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"file        orders.csv (a batch file)\n",
		"batch file  90 processed, 1 duplicate, 12 dead letters (last commit 2026-12-06T09:00:00Z)\n",
		"            dead letter orders~L2.csv\n",
		"            and 2 more dead letters (spool errors DIR lists them)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("story lacks %q:\n%s", want, out)
		}
	}
}

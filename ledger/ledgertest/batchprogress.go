package ledgertest

import (
	"slices"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// testBatchProgress: RecordBatch commits a batch file's records and its
// progress together: the first batch inserts the progress, the next
// updates it; a batch that fails (a claim recorded twice) changes neither
// the records nor the progress; an empty batch writes the progress alone;
// DeadLetterIno finds a dead letter by its inode, and nothing else.
func testBatchProgress(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	if _, ok, err := db.Consumer().BatchProgress(ctx, "f:1:2:3"); err != nil || ok {
		t.Fatalf("BatchProgress of a new ledger = %v, %v; want none", ok, err)
	}
	p := spool.BatchProgress{File: "f:1:2:3", Batch: "s:1:2", Position: "2:40:3"}
	res, err := db.Consumer().RecordBatch(ctx, []*spool.Delivery{valid("s:1:2#0", msg{ID: "r0"}), rejected("s:1:2#1", "f~L3.csv", 901, spool.ReasonParse, "", "line 3: bad")}, spool.Work{}, p)
	if err != nil || len(res) != 2 || res[0].Outcome != spool.OutcomeProcessed || res[1].Outcome != spool.OutcomeDeadLetter {
		t.Fatalf("RecordBatch = %+v, %v; want processed and a dead letter", res, err)
	}
	if got, ok, err := db.Consumer().BatchProgress(ctx, p.File); err != nil || !ok || got != p {
		t.Fatalf("BatchProgress = %+v, %v, %v; want %+v", got, ok, err, p)
	}
	// A failing batch: its claim s:1:2#0 is recorded already.
	q := p
	q.Position = "3:60:4"
	if _, err := db.Consumer().RecordBatch(ctx, []*spool.Delivery{valid("s:1:2#2", msg{ID: "r2"}), rejected("s:1:2#1", "f~L3.csv", 902, spool.ReasonParse, "", "again")}, spool.Work{}, q); err == nil {
		t.Fatal("RecordBatch with a claim recorded twice: nil error, want one")
	}
	if got, _, err := db.Consumer().BatchProgress(ctx, p.File); err != nil || got != p {
		t.Fatalf("BatchProgress after a failed batch = %+v, %v; want it unchanged, %+v", got, err, p)
	}
	if _, ok := processedRow(t, db, "r2"); ok {
		t.Fatal("r2 processed by a batch that failed")
	}
	if _, err := db.Consumer().RecordBatch(ctx, []*spool.Delivery{valid("s:1:2#2", msg{ID: "r2"})}, spool.Work{}, q); err != nil {
		t.Fatal(err)
	}
	if got, _, err := db.Consumer().BatchProgress(ctx, p.File); err != nil || got != q {
		t.Fatalf("BatchProgress after the next batch = %+v, %v; want %+v", got, err, q)
	}
	if _, ok := processedRow(t, db, "r2"); !ok {
		t.Fatal("r2 not processed")
	}
	e := q
	e.Position = "4:61:5"
	if res, err := db.Consumer().RecordBatch(ctx, nil, spool.Work{}, e); err != nil || len(res) != 0 {
		t.Fatalf("RecordBatch of no records = %v, %v", res, err)
	}
	if got, _, err := db.Consumer().BatchProgress(ctx, p.File); err != nil || got != e {
		t.Fatalf("BatchProgress after an empty batch = %+v, %v; want %+v", got, err, e)
	}
	for ino, want := range map[uint64]bool{901: true, 902: false, 0: false} {
		if got, err := db.Consumer().DeadLetterIno(ctx, ino); err != nil || got != want {
			t.Errorf("DeadLetterIno(%d) = %v, %v; want %v", ino, got, err, want)
		}
	}
	// A record its handler dead-lettered is recorded under its origin
	// until its file is written and named.
	h := rejected("s:1:2#3", "f#L5", 77, spool.ReasonHandler, "", "order closed")
	if _, err := db.Consumer().RecordBatch(ctx, []*spool.Delivery{h}, spool.Work{}, e); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Consumer().UnwrittenDeadLetters(ctx, "s:1:2", "f#"); err != nil || !slices.Equal(got, []string{"s:1:2#3"}) {
		t.Fatalf("UnwrittenDeadLetters = %q, %v; want s:1:2#3 (s:1:2#1 names its file)", got, err)
	}
	if got, err := db.Consumer().UnwrittenDeadLetters(ctx, "s:1", "f#"); err != nil || len(got) != 0 {
		t.Fatalf("UnwrittenDeadLetters of another batch = %q, %v", got, err)
	}
	if err := db.Consumer().SetDeadLetterFile(ctx, "s:1:2#3", "f~L5.csv", 903); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Consumer().UnwrittenDeadLetters(ctx, "s:1:2", "f#"); err != nil || len(got) != 0 {
		t.Fatalf("UnwrittenDeadLetters once written = %q, %v", got, err)
	}
	if ok, err := db.Consumer().DeadLetterIno(ctx, 903); err != nil || !ok {
		t.Fatalf("DeadLetterIno(903) = %v, %v after SetDeadLetterFile", ok, err)
	}
	if err := db.Consumer().SetDeadLetterFile(ctx, "s:1:2#0", "f~L2.csv", 904); err == nil {
		t.Error("SetDeadLetterFile of a processed record: nil error, want one")
	}
	if _, err := db.Consumer().RecordBatch(ctx, nil, spool.Work{}, spool.BatchProgress{File: "x"}); err == nil {
		t.Error("RecordBatch without a batch identity: nil error, want one")
	}

	testBatchOddName(t, db)
	testBatchCounts(t, db, p.File)
}

// testBatchOddName: a batch file whose name is not UTF-8 (or holds a
// NUL) has its progress kept and found, on every engine, and its
// records' unwritten dead letters found under its origin.
func testBatchOddName(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	p := spool.BatchProgress{File: "odd\xff\x00.csv:5:6:7", Batch: "o:5:6", Position: "1:20:2"}
	h := rejected("o:5:6#0", "odd\xff\x00.csv#L2", 0, spool.ReasonHandler, "", "refused")
	if _, err := db.Consumer().RecordBatch(ctx, []*spool.Delivery{h}, spool.Work{}, p); err != nil {
		t.Fatalf("RecordBatch of a file whose name is not UTF-8: %v", err)
	}
	if got, ok, err := db.Consumer().BatchProgress(ctx, p.File); err != nil || !ok || got != p {
		t.Fatalf("BatchProgress of a file whose name is not UTF-8 = %+v, %v, %v; want %+v", got, ok, err, p)
	}
	if got, err := db.Consumer().UnwrittenDeadLetters(ctx, "o:5:6", "odd\xff\x00.csv#"); err != nil || !slices.Equal(got, []string{"o:5:6#0"}) {
		t.Fatalf("UnwrittenDeadLetters of a file whose name is not UTF-8 = %q, %v; want o:5:6#0", got, err)
	}
	// fsck lists it, its name as the ledger stores names.
	want := spool.BatchFileID{Name: "odd\uFFFD\uFFFD.csv", Ino: 5, Size: 6, Mtime: 7}
	found := false
	err := db.Fsck().EachBatchFile(ctx, func(id spool.BatchFileID, position string) error {
		if id == want {
			found = found || position == p.Position
		}
		return nil
	})
	if err != nil || !found {
		t.Fatalf("EachBatchFile: %v; want %+v at %s among the files", err, want, p.Position)
	}
}

// testBatchCounts: a batch file's counts are those of the records its
// progress passed (testBatchProgress's: two processed, two dead letters,
// the failed batch's none), plus the Passed counts of a write; another
// file of the same records counts duplicates; RecentBatchFiles lists them
// with the file's name, at most n.
func testBatchCounts(t *testing.T, db *ledger.DB, file string) {
	ctx := t.Context()
	byName := func(n int) map[string]ledger.BatchFile {
		t.Helper()
		fs, err := db.Messages().RecentBatchFiles(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]ledger.BatchFile{}
		for _, f := range fs {
			m[f.Name] = f
		}
		if len(m) != len(fs) || len(fs) > n {
			t.Fatalf("RecentBatchFiles(%d) = %+v", n, fs)
		}
		return m
	}
	f := byName(10)["f"]
	if f.Processed != 2 || f.Duplicates != 0 || f.DeadLetters != 2 || f.At.IsZero() {
		t.Fatalf("file f counts %+v, want 2 processed and 2 dead letters", f)
	}
	passed := spool.BatchProgress{File: file, Batch: "s:1:2", Position: "9:99:9",
		Passed: spool.BatchCounts{Processed: 3, Duplicates: 1}}
	if _, err := db.Consumer().RecordBatch(ctx, nil, spool.Work{}, passed); err != nil {
		t.Fatal(err)
	}
	other := spool.BatchProgress{File: "g:h.csv:7:8:9", Batch: "s:7:8", Position: "1:10:2"}
	if _, err := db.Consumer().RecordBatch(ctx, []*spool.Delivery{valid("s:7:8#0", msg{ID: "r0"}), valid("s:7:8#1", msg{ID: "r2"})}, spool.Work{}, other); err != nil {
		t.Fatal(err)
	}
	all := byName(10)
	if f := all["f"]; f.Processed != 5 || f.Duplicates != 1 || f.DeadLetters != 2 || f.Records() != 8 {
		t.Errorf("file f counts %+v after Passed, want 5, 1 and 2", f)
	}
	if g := all["g:h.csv"]; g.Processed != 0 || g.Duplicates != 2 || g.DeadLetters != 0 {
		t.Errorf("file g:h.csv counts %+v, want its 2 records duplicates", g)
	}
	if len(byName(1)) != 1 {
		t.Error("RecentBatchFiles(1) did not stop at one")
	}

	// BatchFilesNamed: the files of one name, the latest first, each with
	// its first dead letters' names; no other name, however alike.
	again := spool.BatchProgress{File: "f:5:6:7", Batch: "s:5:6", Position: "1:10:2"}
	if _, err := db.Consumer().RecordBatch(ctx, []*spool.Delivery{valid("s:5:6#0", msg{ID: "r0"})}, spool.Work{}, again); err != nil {
		t.Fatal(err)
	}
	named := func(name string, limit int) []ledger.BatchFileStory {
		t.Helper()
		fs, err := db.Messages().BatchFilesNamed(ctx, name, limit)
		if err != nil {
			t.Fatalf("BatchFilesNamed(%q): %v", name, err)
		}
		return fs
	}
	fs := named("f", 10)
	if len(fs) != 2 || fs[0].Duplicates != 1 || fs[0].Records() != 1 || fs[0].DeadLetterFiles != nil ||
		fs[1].Records() != 8 || !slices.Equal(fs[1].DeadLetterFiles, []string{"f~L3.csv", "f~L5.csv"}) {
		t.Errorf("BatchFilesNamed(f) = %+v; want the file sent again (a duplicate), then the first (8 records, dead letters f~L3.csv and f~L5.csv)", fs)
	}
	if fs := named("f", 1); len(fs) != 2 || !slices.Equal(fs[1].DeadLetterFiles, []string{"f~L3.csv"}) {
		t.Errorf("BatchFilesNamed(f, 1) = %+v; want one dead letter's name", fs)
	}
	if fs := named("g:h.csv", 10); len(fs) != 1 || fs[0].Name != "g:h.csv" || fs[0].Duplicates != 2 {
		t.Errorf("BatchFilesNamed(g:h.csv) = %+v; want the one file, 2 duplicates", fs)
	}
	for _, name := range []string{"F", "g", "_", "%", "f:5", "f~L3.csv", ""} {
		if fs := named(name, 10); len(fs) != 0 {
			t.Errorf("BatchFilesNamed(%q) = %+v; want none", name, fs)
		}
	}
}

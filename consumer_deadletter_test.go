package spool_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/queue"
)

// TestBatchDeadLetterSyncFault: when the write of a chunk's dead letters
// fails after their files reached error/ (a directory sync failing, say),
// the chunk is not committed: none of those files is recorded in the
// ledger, and the batch file is not done. A run after it resumes, adopts
// each of those files as its record's dead letter (its inode recorded, no
// second copy written) and ends with every record counted once.
func TestBatchDeadLetterSyncFault(t *testing.T) {
	q, files := orderedBatchQueue(t)
	const n, every = 1000, 40
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if i%every == 0 {
			fmt.Fprintf(&b, `{"msg_id":"M-%d","order_no":"K%d","seq":%d}`+"\n", i, i%7, i) // no amount: poison
			continue
		}
		fmt.Fprintf(&b, `{"msg_id":"M-%d","order_no":"K%d","seq":%d,"amount":"1.00"}`+"\n", i, i%7, i)
	}
	if _, err := q.Dir.WriteFile(queue.Inbox, "f.jsonl", []byte(b.String())); err != nil {
		t.Fatal(err)
	}
	newConsumer := func() *spool.Consumer {
		c, err := spool.NewConsumer(q.Dir, q.Ledger.Consumer(), spool.Config{BatchSize: 100, Batch: files})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx := context.Background()
	fault := errors.New("injected directory sync fault")
	var calls int
	var unsynced []queue.StoredCopy
	c := newConsumer()
	spool.WrapWriteFiles(c, func(next spool.WriteFilesFunc) spool.WriteFilesFunc {
		return func(s queue.Stage, fs []queue.StageFile) ([]queue.StoredCopy, error) {
			calls++
			stored, err := next(s, fs)
			if err != nil || calls != 3 {
				return stored, err
			}
			// The files are in error/; their durability is in doubt.
			unsynced = stored
			return nil, fault
		}
	})
	if _, err := c.Drain(ctx); !errors.Is(err, fault) {
		t.Fatalf("Drain with the third chunk's dead letters failing = %v, want %v", err, fault)
	}
	if len(unsynced) == 0 {
		t.Fatal("the fault was never injected")
	}
	l := q.Ledger.Consumer()
	for _, f := range unsynced {
		if known, err := l.DeadLetterIno(ctx, f.Ino); err != nil || known {
			t.Errorf("%s: recorded %v, %v; want not recorded, its write having failed", f.Name, known, err)
		}
	}
	if _, err := os.Stat(q.Dir.StagePath(queue.Done) + "/f.jsonl"); err == nil {
		t.Error("the batch file is in done/ after a failed chunk")
	}

	st, err := newConsumer().Drain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range unsynced {
		if known, err := l.DeadLetterIno(ctx, f.Ino); err != nil || !known {
			t.Errorf("%s: recorded %v, %v after the resumed run; want it adopted", f.Name, known, err)
		}
	}
	ents, err := os.ReadDir(q.Dir.StagePath(queue.Error))
	if err != nil {
		t.Fatal(err)
	}
	var dead int
	for _, e := range ents {
		if strings.Count(e.Name(), "~") > 1 {
			t.Errorf("second copy %s in error/", e.Name())
		}
		dead++
	}
	if dead != n/every {
		t.Errorf("%d files in error/, want %d", dead, n/every)
	}
	if _, err := os.Stat(q.Dir.StagePath(queue.Done) + "/f.jsonl"); err != nil {
		t.Errorf("the batch file is not in done/ after the resumed run: %v; stats %+v", err, st)
	}
}

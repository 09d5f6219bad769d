package ledger_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// TestBindBesideFirstCommit starts a writer's Bind beside another
// consumer's first commit and move into done/, over and over: the starting
// writer must never take the ledger for an empty one. It did, in one CI run
// of four consumers started at once, when Bind read the ledger (empty) and
// then done/ (the other's first message just moved in). A consumer commits
// before it moves, so the directories are read first.
func TestBindBesideFirstCommit(t *testing.T) {
	const rounds = 40
	for round := range rounds {
		dir := filepath.Join(t.TempDir(), "q")
		if err := queue.Init(dir); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "ledger.db")
		first := openBound(t, dir, path)
		second, err := ledger.Open(t.Context(), path, ledger.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q2, err := queue.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			moved = make(chan struct{})
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			d := delivery(fmt.Sprintf("c%d", round), fmt.Sprintf("m%d", round))
			if _, err := first.Consumer().Record(t.Context(), []*spool.Delivery{d}, spool.Work{}); err != nil {
				t.Errorf("Record: %v", err)
			}
			// The move into done/, after the commit, as a consumer does.
			if err := os.WriteFile(filepath.Join(dir, "done", d.File), d.Message.Raw, 0o644); err != nil {
				t.Error(err)
			}
			close(moved)
		}()
		close(start)
		// Bind until the other's message is in done/, and once after.
		for done := false; !done; {
			select {
			case <-moved:
				done = true
			default:
			}
			if _, err := ledger.Bind(t.Context(), second, q2, ledger.BindWrite); err != nil {
				t.Fatalf("round %d: Bind beside a first commit: %v", round, err)
			}
		}
		wg.Wait()
		for _, c := range []interface{ Close() error }{first, second, q2} {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// openBound opens the SQLite ledger at path and binds it to the queue at
// dir, as a first consumer does.
func openBound(t *testing.T, dir, path string) *ledger.DB {
	t.Helper()
	db, err := ledger.Open(t.Context(), path, ledger.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := queue.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := ledger.Bind(t.Context(), db, q, ledger.BindWrite); err != nil {
		t.Fatal(err)
	}
	return db
}

// delivery is a valid delivery of msgID under claim.
func delivery(claim, msgID string) *spool.Delivery {
	raw := `{"msg_id":"` + msgID + `","order_no":"A","seq":1,"amount":1}`
	sum := sha256.Sum256([]byte(raw))
	return &spool.Delivery{
		Claim: claim, File: msgID + ".json", Ino: 1, Consumer: "host/1/test",
		Hash: hex.EncodeToString(sum[:]), Size: int64(len(raw)),
		Message: &spool.Message{MsgID: msgID, OrderNo: "A", Seq: 1, Amount: "1", Raw: []byte(raw)},
		At:      time.Now(),
	}
}

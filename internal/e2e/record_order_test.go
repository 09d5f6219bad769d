//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestDrainOrderAcrossBatches drains, in batches of 3, a queue whose
// msg_ids recur across batch boundaries, near (four files in a row) and
// far (every tenth file), with content that differs from one delivery to
// the next: on every engine the earliest file of a msg_id in claim order
// (name order) is the one processed, every later one is its duplicate,
// and a duplicate is a conflict exactly when its content differs from that
// first file's. On an engine whose record transactions run side by side
// (PostgreSQL, MariaDB) this holds only if a batch waits for the batches
// in flight that share a msg_id with it.
func TestDrainOrderAcrossBatches(t *testing.T) {
	t.Parallel()
	const files = 150
	type file struct{ name, id, amount string }
	var queue []file
	for i := range files {
		id := fmt.Sprintf("near%03d", i/4)
		if i%3 == 1 {
			id = fmt.Sprintf("far%d", i%10)
		}
		queue = append(queue, file{fmt.Sprintf("f%03d.json", i), id, fmt.Sprintf("%d.00", 1+i%2)})
	}
	// What serial recording in name order makes of the queue.
	type want struct {
		processed string
		amount    string
		conflicts []string
	}
	wants := map[string]*want{}
	for _, f := range queue {
		w := wants[f.id]
		switch {
		case w == nil:
			wants[f.id] = &want{processed: f.name, amount: f.amount}
		case f.amount != w.amount:
			w.conflicts = append(w.conflicts, f.name)
		}
	}
	for _, e := range ledgerEngines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			dsn := e.dsn(t)
			q := filepath.Join(t.TempDir(), "q")
			db := func(args ...string) []string {
				if dsn != "" {
					args = append(args, "--db", dsn)
				}
				return args
			}
			mustRun(t, 0, db("init", q)...)
			for _, f := range queue {
				putMessage(t, q, f.name, fmt.Sprintf(`{"msg_id":%q,"order_no":"O","seq":1,"amount":%q}`, f.id, f.amount))
			}
			r := mustRun(t, 0, db("consume", q, "--batch", "3")...)
			processed := len(wants)
			if line := fmt.Sprintf("processed=%d duplicates=%d dead-letters=0", processed, files-processed); !strings.Contains(r.stdout, line) {
				t.Fatalf("consume: want %q in\n%s", line, r.stdout)
			}
			var got []struct {
				MsgID     string `json:"msg_id"`
				Processed string `json:"processed_file"`
				Duplicate string `json:"duplicate_file"`
			}
			if err := json.Unmarshal([]byte(mustRun(t, 1, db("dups", q, "--conflicts", "--json")...).stdout), &got); err != nil {
				t.Fatal(err)
			}
			conflicts := map[string][]string{}
			for _, c := range got {
				w := wants[c.MsgID]
				if w == nil {
					t.Fatalf("conflict of unknown msg_id %q", c.MsgID)
				}
				if c.Processed != w.processed {
					t.Errorf("%s: %s processed, want the earliest file %s", c.MsgID, c.Processed, w.processed)
				}
				conflicts[c.MsgID] = append(conflicts[c.MsgID], c.Duplicate)
			}
			for id, w := range wants {
				have := conflicts[id]
				sort.Strings(have)
				if fmt.Sprint(have) != fmt.Sprint(w.conflicts) {
					t.Errorf("%s: conflicting duplicates %v, want %v", id, have, w.conflicts)
				}
			}
		})
	}
}

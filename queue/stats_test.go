//go:build linux

package queue

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStats: Stats counts what Count counts in every stage, claims in
// session directories included, and finds the oldest message: by
// modification time in inbox/, by the time of the rename into the stage in
// processing/ and error/.
func TestStats(t *testing.T) {
	d := newQueue(t)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := range 3 {
		name := fmt.Sprintf("m%d.json", i)
		put(t, d, Inbox, name, "{}")
		if err := os.Chtimes(filepath.Join(d.StagePath(Inbox), name), old, old.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	put(t, d, Inbox, ".hidden.json", "{}")
	put(t, d, Inbox, "notes.txt", "")
	put(t, d, Done, "d.json", "{}")
	put(t, d, Error, "e.json", "{}")
	s, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := time.Now().Add(-time.Second)
	if _, err := s.Claim("m2.json"); err != nil {
		t.Fatal(err)
	}
	put(t, d, Processing, "loose.json", "{}")

	for _, stage := range Stages {
		want, err := d.Count(stage)
		if err != nil {
			t.Fatal(err)
		}
		st, err := d.Stats(stage, true)
		if err != nil {
			t.Fatal(err)
		}
		if st.Messages != want {
			t.Errorf("%s: Stats counts %d, Count %d", stage, st.Messages, want)
		}
		noAge, err := d.Stats(stage, false)
		if err != nil || noAge.Messages != want || !noAge.Oldest.IsZero() {
			t.Errorf("%s without ages: %+v, %v; want %d messages and no time", stage, noAge, err, want)
		}
		switch stage {
		case Inbox:
			if !st.Oldest.Equal(old) {
				t.Errorf("inbox oldest = %v, want the earliest mtime %v", st.Oldest, old)
			}
		case Processing, Error:
			if st.Oldest.Before(before) {
				t.Errorf("%s oldest = %v, want the time it was moved in (after %v), not its mtime", stage, st.Oldest, before)
			}
		}
	}
	if st, _ := d.Stats(Processing, false); st.Messages != 2 {
		t.Errorf("processing: %d messages, want the claim and the loose message", st.Messages)
	}
}

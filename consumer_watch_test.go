package spool_test

import (
	"context"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/queue"
)

// TestMinAgeDrain: a drain with MinAge takes the files that have settled
// and leaves the one that changed just now for a later run.
func TestMinAgeDrain(t *testing.T) {
	f := newFixture(t, map[string]string{"a.json": msg("a", "A", 1)})
	time.Sleep(1100 * time.Millisecond) // a.json settles
	if _, err := f.dir.WriteFile(queue.Inbox, "b.json", []byte(msg("b", "B", 1))); err != nil {
		t.Fatal(err)
	}
	c, err := spool.NewConsumer(f.dir, f.ledger.Consumer(), spool.Config{MinAge: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Drain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// b.json changed a moment ago: only a stall of a second between its
	// write and the drain's claim could let it through.
	if st.Processed != 1 || f.count(t, queue.Inbox) != 1 {
		t.Fatalf("drain: %+v, inbox/ %d; want a.json processed and b.json left", st, f.count(t, queue.Inbox))
	}
	time.Sleep(1100 * time.Millisecond)
	if st, err = c.Drain(context.Background()); err != nil || st.Processed != 1 {
		t.Fatalf("second drain: %+v, %v; want b.json processed", st, err)
	}
}

//go:build linux

package queue

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRecoverUncalled: the recovery of a dead session of this host and
// boot lists its claims whose call was never marked as started, and
// removes the marks with the directory; a session without its boot mark
// (killed before writing it, or of an earlier boot) lists none; a live
// session that finished its claims removes its marks at Close.
func TestRecoverUncalled(t *testing.T) {
	if bootID() == "" {
		t.Skip("no boot id on this system")
	}
	toInbox := func(context.Context, *Orphan) (Stage, error) { return Inbox, nil }
	for _, bootMark := range []bool{true, false} {
		d := newQueue(t)
		dead, err := d.Join()
		if err != nil {
			t.Fatal(err)
		}
		var claims []*Claim
		for _, n := range []string{"a.json", "b.json", "c.json"} {
			put(t, d, Inbox, n, `{}`)
			c, err := dead.Claim(n)
			if err != nil {
				t.Fatal(err)
			}
			claims = append(claims, c)
		}
		if err := dead.MarkCalled(claims[0]); err != nil {
			t.Fatal(err)
		}
		if err := dead.MarkCalled(claims[1]); err != nil {
			t.Fatal(err)
		}
		if err := dead.ClearCalled(claims[1]); err != nil { // settled, then its claim was retried
			t.Fatal(err)
		}
		sessionDir := filepath.Join(d.StagePath(Processing), dead.ID())
		if !bootMark {
			if err := os.Remove(filepath.Join(sessionDir, bootPrefix+bootID())); err != nil {
				t.Fatal(err)
			}
		}
		if err := dead.Close(); err == nil {
			t.Fatal("Close of a session with claims in flight succeeded")
		}
		rec, err := d.Recover(context.Background(), toInbox, DefaultLease)
		if err != nil {
			t.Fatal(err)
		}
		got := rec.Uncalled[dead.ID()]
		slices.Sort(got)
		want := []string{claims[1].ID, claims[2].ID}
		if !bootMark {
			want = nil
		}
		slices.Sort(want)
		if !slices.Equal(got, want) || len(rec.Uncalled) > 1 {
			t.Errorf("boot mark %v: Uncalled = %v, want %v for %s", bootMark, rec.Uncalled, want, dead.ID())
		}
		if rec.ToInbox != 3 || rec.Sessions != 1 {
			t.Errorf("boot mark %v: Recover = %+v, want 3 claims back and the session removed", bootMark, rec)
		}
		if _, err := os.Stat(sessionDir); !os.IsNotExist(err) {
			t.Errorf("boot mark %v: the session directory is still there: %v", bootMark, err)
		}
		if got := names(t, d.StagePath(Inbox)); strings.Join(got, ",") != "a.json,b.json,c.json" {
			t.Errorf("boot mark %v: inbox = %v, want the three claims and no mark", bootMark, got)
		}
	}
	// A live session whose calls all settled leaves nothing at Close.
	d := newQueue(t)
	s, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	put(t, d, Inbox, "a.json", `{}`)
	c, err := s.Claim("a.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkCalled(c); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(c, Done); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close of a session whose claims left, with a call mark left: %v", err)
	}
	if got := names(t, d.StagePath(Processing)); len(got) != 0 {
		t.Errorf("processing/ = %v after Close, want empty", got)
	}
}

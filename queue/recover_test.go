//go:build linux

package queue

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRecoverForeignSessionAfterLease: a session of another host cannot be
// judged by its lock (the kernel holding it is elsewhere), so its claims are
// taken over only once its lease, the directory's mtime, has expired.
func TestRecoverForeignSessionAfterLease(t *testing.T) {
	d := newQueue(t)
	proc := d.StagePath(Processing)
	for _, s := range []struct {
		id  string
		age time.Duration
	}{{"aaaa-1@other-host", 3 * time.Minute}, {"bbbb-2@other-host", 10 * time.Second}} {
		dir := filepath.Join(proc, s.id)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, s.id[:4]+".json"), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		past := time.Now().Add(-s.age)
		if err := os.Chtimes(dir, past, past); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := d.Recover(context.Background(), func(context.Context, *Orphan) (Stage, error) { return Inbox, nil }, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Returned) != 1 || rec.Returned[0].Stored != "aaaa.json" {
		t.Fatalf("Recover returned %+v, want the expired session's claim", rec.Returned)
	}
	rec.Returned = nil
	if !reflect.DeepEqual(rec, Recovered{Sessions: 1, ToInbox: 1}) {
		t.Fatalf("Recover = %+v, want only the expired session", rec)
	}
	if got := names(t, d.StagePath(Inbox)); strings.Join(got, ",") != "aaaa.json" {
		t.Fatalf("inbox = %v, want the expired session's claim", got)
	}
	if got := names(t, proc); strings.Join(got, ",") != "bbbb-2@other-host" {
		t.Fatalf("processing = %v, want the live foreign session left alone", got)
	}
}

// TestRecoverFinishesLinkedMove: on a filesystem without RENAME_NOREPLACE
// a move is a link then an unlink, and a crash between them leaves one
// file under two names: a claim still in inbox/ and in its session
// directory, or a finished claim in done/ and still in its session
// directory. Recovery, moving the claim where it belongs, finds its own
// inode under the name it wants there and finishes the move by removing
// the session's name: the file keeps one name, and no "~2" copy appears
// to be consumed or counted twice.
func TestRecoverFinishesLinkedMove(t *testing.T) {
	d := newQueue(t)
	proc := d.StagePath(Processing)
	dead := filepath.Join(proc, "dddd-1@"+thisHost())
	if err := os.Mkdir(dead, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, stage := range map[string]Stage{"claimed.json": Inbox, "finished.json": Done} {
		p := filepath.Join(d.StagePath(stage), name)
		if err := os.WriteFile(p, []byte(`{"msg_id":"`+name+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(p, filepath.Join(dead, name)); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := d.Recover(context.Background(), func(_ context.Context, o *Orphan) (Stage, error) {
		if o.Name() == "finished.json" {
			return Done, nil
		}
		return Inbox, nil
	}, DefaultLease)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Sessions != 1 || rec.ToInbox != 1 || rec.ToDone != 1 {
		t.Errorf("Recover = %+v, want the session and its two claims", rec)
	}
	for stage, want := range map[Stage]string{Inbox: "claimed.json", Done: "finished.json", Processing: ""} {
		if got := strings.Join(names(t, d.StagePath(stage)), ","); got != want {
			t.Errorf("%s/ = %q, want %q", stage, got, want)
		}
	}
	for _, p := range []string{filepath.Join(d.StagePath(Inbox), "claimed.json"), filepath.Join(d.StagePath(Done), "finished.json")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if n := fi.Sys().(*syscall.Stat_t).Nlink; n != 1 {
			t.Errorf("%s: %d names, want 1", p, n)
		}
	}
}

// TestFallbackMoveLosesRace: without RENAME_NOREPLACE a move is a link
// then an unlink, and two movers of one file (two hosts claiming it) can
// both link it: the one whose unlink finds the file gone lost the race,
// removes its own link and reports the file gone (ErrGone for a claim),
// so that exactly one holds the file. The winner's move is whole.
func TestFallbackMoveLosesRace(t *testing.T) {
	d := newQueue(t)
	noReplaceUnsupported.Store(true)
	defer noReplaceUnsupported.Store(false)
	if err := os.WriteFile(filepath.Join(d.StagePath(Inbox), "f.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	winner, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	loser, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	afterLink = func() {
		afterLink = func() {}
		// The other host's claim runs whole between this one's link and
		// its unlink.
		if _, err := winner.Claim("f.json"); err != nil {
			t.Errorf("the winner's claim: %v", err)
		}
	}
	defer func() { afterLink = func() {} }()
	if _, err := loser.Claim("f.json"); !errors.Is(err, ErrGone) {
		t.Fatalf("the loser's claim: %v, want ErrGone", err)
	}
	for _, s := range []*Session{winner, loser} {
		want := ""
		if s == winner {
			want = "f.json"
		}
		var claims []string
		for _, n := range names(t, filepath.Join(d.StagePath(Processing), s.ID())) {
			if !isMark(n) { // the session's boot mark
				claims = append(claims, n)
			}
		}
		if got := strings.Join(claims, ","); got != want {
			t.Errorf("session %s holds %q, want %q", s.ID(), got, want)
		}
	}
	if got := names(t, d.StagePath(Inbox)); len(got) != 0 {
		t.Errorf("inbox/ = %v, want nothing", got)
	}
}

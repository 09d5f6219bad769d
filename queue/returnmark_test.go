//go:build linux

package queue

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// announceDone announces a data file of these tests by name.done.
func announceDone(name string) string {
	if strings.HasSuffix(name, ".done") {
		return ""
	}
	return name + ".done"
}

// resolveBatch resolves as a consumer of batch files does: the claimed
// done-files to done/, the data files (never recorded here) to inbox/.
func resolveBatch(_ context.Context, o *Orphan) (Stage, error) {
	if strings.HasSuffix(o.Name(), ".done") {
		return Done, nil
	}
	return Inbox, nil
}

// deadSession makes the directory of a dead session of this host holding
// files (name to content), and returns its path.
func deadSession(t *testing.T, d *Dir, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(d.StagePath(Processing), "rrrr-1@"+thisHost())
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func wantStages(t *testing.T, d *Dir, want map[Stage]string) {
	t.Helper()
	for stage, w := range want {
		if got := strings.Join(names(t, d.StagePath(stage)), ","); got != w {
			t.Errorf("%s/ = %q, want %q", stage, got, w)
		}
	}
}

// TestRecoverAnnouncesReturnedFile: recovery puts a dead session's batch
// file back in inbox/ with its claimed done-file as its announcement,
// content kept; when a producer wrote a new file of the same name into
// inbox/ meanwhile, the returned file gets "stem~2" and the done-file
// follows it, so the producer's file stays unannounced until its own
// done-file comes.
func TestRecoverAnnouncesReturnedFile(t *testing.T) {
	for _, tc := range []struct {
		name     string
		producer bool // a new feed.jsonl is in inbox/, not announced yet
		want     map[Stage]string
	}{
		{"free name", false, map[Stage]string{Inbox: "feed.jsonl,feed.jsonl.done", Done: "", Processing: ""}},
		{"name taken", true, map[Stage]string{Inbox: "feed.jsonl,feed~2.jsonl,feed~2.jsonl.done", Done: "", Processing: ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newQueue(t)
			deadSession(t, d, map[string]string{"feed.jsonl": "{}\n", "feed.jsonl.done": "sha256 abc"})
			if tc.producer {
				if err := os.WriteFile(filepath.Join(d.StagePath(Inbox), "feed.jsonl"), []byte("{"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			rec, err := d.RecoverWith(context.Background(), resolveBatch, DefaultLease, nil, announceDone)
			if err != nil {
				t.Fatal(err)
			}
			if rec.ToInbox != 2 || rec.ToDone != 0 || rec.Sessions != 1 {
				t.Errorf("Recover = %+v, want the data file back and its done-file with it", rec)
			}
			wantStages(t, d, tc.want)
			done := "feed.jsonl.done"
			if tc.producer {
				done = "feed~2.jsonl.done"
			}
			if b, err := os.ReadFile(filepath.Join(d.StagePath(Inbox), done)); err != nil || string(b) != "sha256 abc" {
				t.Errorf("inbox/%s = %q, %v: want the producer's done-file, content kept", done, b, err)
			}
		})
	}
}

// TestRecoverFinishesReturn: a mover killed between moving a batch file
// back to inbox/ and announcing it there leaves its return mark in the
// session directory. The next recovery announces the file the mark names
// when it is in inbox/ with the mark's inode, and only then; a mark whose
// claim is still in the session (killed before the move) is simply
// redone. Nothing is left in processing/.
func TestRecoverFinishesReturn(t *testing.T) {
	t.Run("killed after the move", func(t *testing.T) {
		d := newQueue(t)
		in := filepath.Join(d.StagePath(Inbox), "feed.jsonl")
		if err := os.WriteFile(in, []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		deadSession(t, d, map[string]string{
			"feed.jsonl.done": "",
			returnPrefix + strconv.FormatUint(inode(t, in), 10): "feed.jsonl",
		})
		if _, err := d.RecoverWith(context.Background(), resolveBatch, DefaultLease, nil, announceDone); err != nil {
			t.Fatal(err)
		}
		wantStages(t, d, map[Stage]string{Inbox: "feed.jsonl,feed.jsonl.done", Done: "feed.jsonl.done", Processing: ""})
	})
	t.Run("killed before the move", func(t *testing.T) {
		d := newQueue(t)
		dir := deadSession(t, d, map[string]string{"feed.jsonl": "{}\n"})
		ino := inode(t, filepath.Join(dir, "feed.jsonl"))
		if err := os.WriteFile(filepath.Join(dir, returnPrefix+strconv.FormatUint(ino, 10)), []byte("feed.jsonl"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := d.RecoverWith(context.Background(), resolveBatch, DefaultLease, nil, announceDone); err != nil {
			t.Fatal(err)
		}
		wantStages(t, d, map[Stage]string{Inbox: "feed.jsonl,feed.jsonl.done", Processing: ""})
	})
	t.Run("another file under the name", func(t *testing.T) {
		// The returned file was consumed, and a producer is writing a new
		// one of that name: the stale mark must not announce it.
		d := newQueue(t)
		in := filepath.Join(d.StagePath(Inbox), "feed.jsonl")
		if err := os.WriteFile(in, []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
		deadSession(t, d, map[string]string{returnPrefix + strconv.FormatUint(inode(t, in)+1, 10): "feed.jsonl"})
		if _, err := d.RecoverWith(context.Background(), resolveBatch, DefaultLease, nil, announceDone); err != nil {
			t.Fatal(err)
		}
		wantStages(t, d, map[Stage]string{Inbox: "feed.jsonl", Processing: ""})
	})
}

// TestReturnAnnounced: a live session gives a batch file back with its
// claimed done-file, which announces it under the name it gets; with a
// done-file of that name in inbox/ already, the claimed one goes to done/
// and the one there announces the file. No mark stays behind.
func TestReturnAnnounced(t *testing.T) {
	for _, tc := range []struct {
		name      string
		announced bool // feed.jsonl.done is in inbox/ again
		want      map[Stage]string
	}{
		{"done-file back", false, map[Stage]string{Inbox: "feed.jsonl,feed.jsonl.done", Done: ""}},
		{"done-file there", true, map[Stage]string{Inbox: "feed.jsonl,feed.jsonl.done", Done: "feed.jsonl.done"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newQueue(t)
			for _, n := range []string{"feed.jsonl", "feed.jsonl.done"} {
				if err := os.WriteFile(filepath.Join(d.StagePath(Inbox), n), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s, err := d.Join()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			cl, err := s.Claim("feed.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			done, err := s.Claim("feed.jsonl.done")
			if err != nil {
				t.Fatal(err)
			}
			if tc.announced {
				if err := os.WriteFile(filepath.Join(d.StagePath(Inbox), "feed.jsonl.done"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			stored, err := s.ReturnAnnounced(cl, done, announceDone)
			if err != nil || stored != "feed.jsonl" {
				t.Fatalf("ReturnAnnounced = %q, %v", stored, err)
			}
			wantStages(t, d, tc.want)
			for _, n := range names(t, filepath.Join(d.StagePath(Processing), s.ID())) {
				if !strings.HasPrefix(n, bootPrefix) {
					t.Errorf("the session directory holds %q after the return", n)
				}
			}
		})
	}
}

// TestCloseKeepsReturnMark: a session whose return failed half-way (the
// file moved, its announcement not written: a full disk) keeps its
// directory and the mark at Close, like a claim left in flight, so that
// the next recovery announces the file; removing the mark with the others
// would leave the file in inbox/ taken by nothing.
func TestCloseKeepsReturnMark(t *testing.T) {
	d := newQueue(t)
	in := filepath.Join(d.StagePath(Inbox), "feed.jsonl")
	if err := os.WriteFile(in, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(d.StagePath(Processing), s.ID())
	mark := returnPrefix + strconv.FormatUint(inode(t, in), 10)
	if err := os.WriteFile(filepath.Join(dir, mark), []byte("feed.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err == nil {
		t.Fatal("Close removed a session directory holding a return mark")
	}
	if _, err := os.Stat(filepath.Join(dir, mark)); err != nil {
		t.Fatalf("the return mark is gone: %v", err)
	}
	if _, err := d.RecoverWith(context.Background(), resolveBatch, DefaultLease, nil, announceDone); err != nil {
		t.Fatal(err)
	}
	wantStages(t, d, map[Stage]string{Inbox: "feed.jsonl,feed.jsonl.done", Processing: ""})
}

// TestHoldKeepsAnnouncement: in a queue of files announced by done-files,
// a held file takes its done-file into held/ with it, so that a producer
// writing the next file of that name meanwhile is not announced by it;
// released, the file comes back announced under the name it gets (here
// "~2", the producer's file being there, unannounced still). A release
// (or a replay from error/) killed between the move and the announcement
// is finished by the next recovery.
func TestHoldKeepsAnnouncement(t *testing.T) {
	d := newQueue(t)
	d.SetAnnouncer(announceDone)
	for _, n := range []string{"feed.json", "feed.json.done"} {
		if err := os.WriteFile(filepath.Join(d.StagePath(Inbox), n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hf, err := d.Hold("feed.json")
	if err != nil {
		t.Fatal(err)
	}
	wantStages(t, d, map[Stage]string{Inbox: "", Held: "feed.json,feed.json.done"})
	if err := os.WriteFile(filepath.Join(d.StagePath(Inbox), "feed.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := d.Unhold(hf.Name, "feed.json")
	if err != nil || got != "feed~2.json" {
		t.Fatalf("Unhold = %q, %v, want feed~2.json", got, err)
	}
	wantStages(t, d, map[Stage]string{Inbox: "feed.json,feed~2.json,feed~2.json.done", Held: ""})
	if b, _ := os.ReadFile(filepath.Join(d.StagePath(Inbox), "feed~2.json.done")); string(b) != "feed.json.done" {
		t.Errorf("inbox/feed~2.json.done holds %q, want the held done-file", b)
	}

	// A release from held/, or a replay from error/, killed between the
	// move and the announcement.
	for _, from := range []Stage{Held, Error} {
		t.Run("killed half-way from "+string(from), func(t *testing.T) {
			d := newQueue(t)
			if err := d.EnsureHeld(); err != nil {
				t.Fatal(err)
			}
			in := filepath.Join(d.StagePath(Inbox), "feed.json")
			if err := os.WriteFile(in, []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
			dir := d.StagePath(from)
			if err := os.WriteFile(filepath.Join(dir, "feed.json.done"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			mark := returnPrefix + strconv.FormatUint(inode(t, in), 10)
			if err := os.WriteFile(filepath.Join(dir, mark), []byte("feed.json\x00feed.json.done"), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := d.RecoverWith(context.Background(), resolveBatch, DefaultLease, nil, announceDone); err != nil {
				t.Fatal(err)
			}
			wantStages(t, d, map[Stage]string{Inbox: "feed.json,feed.json.done", from: ""})
		})
	}
}

// TestRecoverListsChangedStage: recovery lists error/ for return marks
// only when the directory changed since its last listing; a mark written
// after a listing that found none (error/ unchanged for long) is still
// found at the next pass, since writing it changes the directory.
func TestRecoverListsChangedStage(t *testing.T) {
	d := newQueue(t)
	errDir := d.StagePath(Error)
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(errDir, old, old); err != nil {
		t.Fatal(err)
	}
	recoverOnce := func() {
		t.Helper()
		if _, err := d.RecoverWith(context.Background(), resolveBatch, DefaultLease, nil, announceDone); err != nil {
			t.Fatal(err)
		}
	}
	recoverOnce() // lists error/, settled and without marks: not again until it changes
	if got, want := d.returnsSeen[1].Load(), old.UnixNano(); got != want {
		t.Fatalf("error/ seen at %d after a listing, want its mtime %d", got, want)
	}
	in := filepath.Join(d.StagePath(Inbox), "feed.json")
	if err := os.WriteFile(in, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	mark := returnPrefix + strconv.FormatUint(inode(t, in), 10)
	if err := os.WriteFile(filepath.Join(errDir, mark), []byte("feed.json\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	recoverOnce()
	wantStages(t, d, map[Stage]string{Inbox: "feed.json,feed.json.done", Error: ""})
}

//go:build linux

package queue

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func newQueue(t testing.TB) *Dir {
	t.Helper()
	root := filepath.Join(t.TempDir(), "q")
	if err := Init(root); err != nil {
		t.Fatal(err)
	}
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func put(t *testing.T, d *Dir, s Stage, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(d.StagePath(s), name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func TestIsMessageName(t *testing.T) {
	for name, want := range map[string]bool{
		"a.json": true, "a b.json": true, "a~2.json": true, "заказ.json": true,
		".json": false, ".x.json": false, "x.json.tmp": false, "notes.txt": false, "x.JSON": false,
	} {
		if got := IsMessageName(name); got != want {
			t.Errorf("IsMessageName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestOpenRefusesIncompleteQueue(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "inbox"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Open(root)
	if !errors.Is(err, ErrNotQueue) {
		t.Fatalf("Open of a dir with only inbox/: err = %v, want ErrNotQueue", err)
	}
	if _, err := Open(filepath.Join(root, "absent")); err == nil {
		t.Fatal("Open of a missing dir succeeded")
	}
}

func TestSuffixed(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
		want string
	}{
		{"a.json", 2, "a~2.json"},
		{"a~2.json", 2, "a~2~2.json"},
		{"noext", 3, "noext~3"},
		{strings.Repeat("é", 127) + ".json", 2, strings.Repeat("é", 124) + "~2.json"},
	} {
		got := suffixed(c.name, c.n)
		if got != c.want {
			t.Errorf("suffixed(%q, %d) = %q, want %q", c.name, c.n, got, c.want)
		}
		if len(got) > maxNameBytes {
			t.Errorf("suffixed(%q) is %d bytes, over NAME_MAX", c.name, len(got))
		}
	}
}

func TestClaimFinishKeepsBothOnCollision(t *testing.T) {
	d := newQueue(t)
	put(t, d, Done, "a.json", "old")
	put(t, d, Inbox, "a.json", "new")
	s, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim("a.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, d.StagePath(Inbox)); len(got) != 0 {
		t.Fatalf("inbox after claim = %v, want empty", got)
	}
	data, err := s.Read(c, 100)
	if err != nil || string(data) != "new" {
		t.Fatalf("Read = %q, %v", data, err)
	}
	stored, err := s.Finish(c, Done)
	if err != nil {
		t.Fatal(err)
	}
	if stored != "a~2.json" {
		t.Fatalf("stored as %q, want a~2.json", stored)
	}
	for name, want := range map[string]string{"a.json": "old", "a~2.json": "new"} {
		got, err := os.ReadFile(filepath.Join(d.StagePath(Done), name))
		if err != nil || string(got) != want {
			t.Errorf("done/%s = %q, %v; want %q", name, got, err, want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := names(t, d.StagePath(Processing)); len(got) != 0 {
		t.Fatalf("processing after close = %v, want empty", got)
	}
}

func TestClaimNeverClobbersInFlight(t *testing.T) {
	d := newQueue(t)
	put(t, d, Inbox, "a.json", "first")
	s, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.Claim("a.json")
	if err != nil {
		t.Fatal(err)
	}
	put(t, d, Inbox, "a.json", "second")
	if _, err := s.Claim("a.json"); !errors.Is(err, ErrBusy) {
		t.Fatalf("second claim of a.json: err = %v, want ErrBusy", err)
	}
	data, _ := s.Read(c, 100)
	if string(data) != "first" {
		t.Fatalf("in-flight claim was clobbered: %q", data)
	}
	if _, err := os.Stat(filepath.Join(d.StagePath(Inbox), "a.json")); err != nil {
		t.Fatalf("second a.json left inbox: %v", err)
	}
	if _, err := s.Finish(c, Done); err != nil {
		t.Fatal(err)
	}
}

// TestClaimRace: many sessions race for the same files; each file is
// claimed exactly once.
func TestClaimRace(t *testing.T) {
	d := newQueue(t)
	const files = 200
	for i := range files {
		put(t, d, Inbox, string(rune('a'+i%26))+strings.Repeat("x", i/26)+".json", "{}")
	}
	var mu sync.Mutex
	won := map[string]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := d.Join()
			if err != nil {
				t.Error(err)
				return
			}
			err = d.Scan(Inbox, func(ns []string) error {
				for _, n := range ns {
					c, err := s.Claim(n)
					if errors.Is(err, ErrGone) {
						continue
					}
					if err != nil {
						return err
					}
					mu.Lock()
					won[n]++
					mu.Unlock()
					if _, err := s.Finish(c, Done); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if len(won) != files {
		t.Fatalf("%d files claimed, want %d", len(won), files)
	}
	for n, k := range won {
		if k != 1 {
			t.Errorf("%s claimed %d times", n, k)
		}
	}
	if got := len(names(t, d.StagePath(Done))); got != files {
		t.Fatalf("done has %d files, want %d", got, files)
	}
}

func TestReadNeverFollowsOrBlocks(t *testing.T) {
	d := newQueue(t)
	outside := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(outside, []byte(`{"msg_id":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(d.StagePath(Inbox), "link.json")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(d.StagePath(Inbox), "fifo.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(d.StagePath(Inbox), "dir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	put(t, d, Inbox, "big.json", strings.Repeat(" ", 2048))
	s, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, n := range []string{"link.json", "fifo.json", "dir.json"} {
		c, err := s.Claim(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Read(c, 1024); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Read(%s) err = %v, want ErrNotRegular", n, err)
		}
		if _, err := s.Finish(c, Error); err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.Claim("big.json")
	if err != nil {
		t.Fatal(err)
	}
	var tl *TooLargeError
	if _, err := s.Read(c, 1024); !errors.As(err, &tl) {
		t.Errorf("Read(big.json) err = %v, want TooLargeError", err)
	}
	if _, err := s.Finish(c, Error); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(outside); err != nil || string(data) != `{"msg_id":"x"}` {
		t.Fatalf("symlink target touched: %q, %v", data, err)
	}
}

// TestReadSeesChangeSinceClaim: Read stops at the size the claim saw only
// when the file really ends there. A file written to after its claim (a
// producer writing straight into inbox/) is read to its end, caught by the
// limit when it grew past it, and a file cut short is read as it now is.
func TestReadSeesChangeSinceClaim(t *testing.T) {
	d := newQueue(t)
	s, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	claimed := func(name, body string) *Claim {
		t.Helper()
		put(t, d, Inbox, name, body)
		c, err := s.Claim(name)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	path := func(name string) string {
		return filepath.Join(d.StagePath(Processing), s.ID(), name)
	}
	write := func(name string, flag int, body string) {
		t.Helper()
		f, err := os.OpenFile(path(name), os.O_WRONLY|flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(body); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}

	cases := []struct {
		name, body string
		change     func(name string)
		limit      int64
		want       string // the content Read returns; "" for TooLargeError
	}{
		{"same.json", "abcdef", func(string) {}, 1024, "abcdef"},
		{"empty.json", "", func(string) {}, 1024, ""},
		{"grew.json", "abc", func(n string) { write(n, os.O_APPEND, "defgh") }, 1024, "abcdefgh"},
		{"grew-by-one.json", "abc", func(n string) { write(n, os.O_APPEND, "d") }, 1024, "abcd"},
		{"grew-past-limit.json", "abc", func(n string) { write(n, os.O_APPEND, strings.Repeat("x", 20)) }, 16, ""},
		{"shrank.json", "abcdef", func(n string) { write(n, os.O_TRUNC, "ab") }, 1024, "ab"},
		{"at-limit.json", strings.Repeat("y", 16), func(string) {}, 16, strings.Repeat("y", 16)},
	}
	for _, tc := range cases {
		c := claimed(tc.name, tc.body)
		tc.change(tc.name)
		data, err := s.Read(c, tc.limit)
		var tl *TooLargeError
		switch {
		case tc.want == "" && tc.body != "":
			if !errors.As(err, &tl) {
				t.Errorf("%s: Read = %q, %v; want TooLargeError", tc.name, data, err)
			}
		case err != nil || string(data) != tc.want:
			t.Errorf("%s: Read = %q, %v; want %q", tc.name, data, err, tc.want)
		}
		if _, err := s.Finish(c, Done); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecoverDeadSession: a session that went away with claims in flight
// (as after kill -9: its lock is gone) is recovered by the next consumer;
// recorded claims are finished, unrecorded ones go back to inbox/, and a
// live session is left alone.
func TestRecoverDeadSession(t *testing.T) {
	d := newQueue(t)
	put(t, d, Inbox, "rec.json", "1")
	put(t, d, Inbox, "bad.json", "2")
	put(t, d, Inbox, "new.json", "3")
	put(t, d, Inbox, "live.json", "4")
	dead, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]Stage{}
	var badClaim string
	for name, to := range map[string]Stage{"rec.json": Done, "bad.json": Error, "new.json": ""} {
		c, err := dead.Claim(name)
		if err != nil {
			t.Fatal(err)
		}
		if to != "" {
			recorded[c.ID] = to
		}
		if to == Error {
			badClaim = c.ID
		}
	}
	// Dying: Close cannot remove a non-empty directory, so the claims stay
	// and the lock is released, exactly like a killed process.
	if err := dead.Close(); err == nil {
		t.Fatal("Close of a session with claims in flight succeeded")
	}
	live, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	lc, err := live.Claim("live.json")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := d.Recover(context.Background(), func(_ context.Context, o *Orphan) (Stage, error) {
		id := o.ID
		if to, ok := recorded[id]; ok {
			return to, nil
		}
		return Inbox, nil
	}, DefaultLease)
	if err != nil {
		t.Fatal(err)
	}
	rec.Uncalled = nil // TestRecoverUncalled
	if len(rec.Returned) != 1 || rec.Returned[0].Name != "new.json" || rec.Returned[0].Stored != "new.json" {
		t.Fatalf("Recover returned %+v, want the unrecorded claim", rec.Returned)
	}
	rec.Returned = nil
	if !reflect.DeepEqual(rec, Recovered{Sessions: 1, ToInbox: 1, ToDone: 1, ToError: 1,
		DeadLetters: []RecoveredFile{{Claim: badClaim, Name: "bad.json", Stored: "bad.json"}}}) {
		t.Fatalf("Recover = %+v", rec)
	}
	want := map[Stage][]string{Inbox: {"new.json"}, Done: {"rec.json"}, Error: {"bad.json"}}
	for s, w := range want {
		if got := names(t, d.StagePath(s)); strings.Join(got, ",") != strings.Join(w, ",") {
			t.Errorf("%s = %v, want %v", s, got, w)
		}
	}
	if n, _ := d.Count(Processing); n != 1 {
		t.Errorf("processing count = %d, want 1 (the live claim)", n)
	}
	if _, err := live.Finish(lc, Done); err != nil {
		t.Fatalf("live claim was disturbed: %v", err)
	}
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	if got := names(t, d.StagePath(Processing)); len(got) != 0 {
		t.Fatalf("processing = %v, want empty", got)
	}
}

// TestStageAndRelease: a replay's two moves. Staging renames a dead letter
// to its hidden name only while it is the file the intent recorded, and is
// idempotent; releasing moves it to inbox/ without replacing anything, once.
func TestStageAndRelease(t *testing.T) {
	d := newQueue(t)
	put(t, d, Error, "a.json", "a")
	put(t, d, Error, "b.json", "b")
	put(t, d, Inbox, "b.json", "newer b")
	inos := map[string]uint64{}
	if err := d.List(Error, func(e Entry) error { inos[e.Name] = e.Ino; return nil }); err != nil {
		t.Fatal(err)
	}
	ino := func(name string) uint64 { return inos[name] }
	inoA, inoB := ino("a.json"), ino("b.json")
	before := snapshot(t, d)
	if ok, err := d.Stage(1, 0, "a.json", inoB); err != nil || ok {
		t.Fatalf("Stage(another file's inode) = %v, %v; want false", ok, err)
	}
	if ok, err := d.Stage(1, 0, "missing.json", 0); err != nil || ok {
		t.Fatalf("Stage(missing) = %v, %v; want false", ok, err)
	}
	for _, bad := range []string{"../a.json", "error/a.json", "..", ""} {
		if _, err := d.Stage(1, 0, bad, 0); !errors.Is(err, ErrPathLike) {
			t.Fatalf("Stage(%q) err = %v, want ErrPathLike", bad, err)
		}
	}
	if after := snapshot(t, d); after != before {
		t.Fatalf("refused stages changed the queue:\nbefore %s\nafter  %s", before, after)
	}
	for i, c := range []struct {
		name string
		ino  uint64
	}{{"a.json", inoA}, {"b.json", inoB}} {
		for range 2 { // the second is a no-op: already staged
			if ok, err := d.Stage(1, i, c.name, c.ino); err != nil || !ok {
				t.Fatalf("Stage(%s) = %v, %v; want true", c.name, ok, err)
			}
		}
	}
	if n, err := d.Count(Error); err != nil || n != 0 {
		t.Fatalf("error/ counts %d messages (%v) while both are staged; want none", n, err)
	}
	var got []string
	for i, name := range []string{"a.json", "b.json"} {
		n, ok, err := d.Release(1, i, name)
		if err != nil || !ok {
			t.Fatalf("Release(%s) = %q, %v, %v", name, n, ok, err)
		}
		got = append(got, n)
		if _, ok, err := d.Release(1, i, name); err != nil || ok {
			t.Fatalf("second Release(%s) = %v, %v; want false", name, ok, err)
		}
	}
	if got[0] != "a.json" || got[1] != "b~2.json" {
		t.Fatalf("released as %v, want [a.json b~2.json]", got)
	}
	if s, name, ok, err := d.Locate(inoB); err != nil || !ok || s != Inbox || name != "b~2.json" {
		t.Fatalf("Locate(b) = %s %s %v %v", s, name, ok, err)
	}
}

func snapshot(t *testing.T, d *Dir) string {
	var b strings.Builder
	for _, s := range Stages {
		b.WriteString(string(s) + ":" + strings.Join(names(t, d.StagePath(s)), ",") + " ")
	}
	return b.String()
}

func TestWriteFileAndCount(t *testing.T) {
	d := newQueue(t)
	for range 3 {
		if _, err := d.WriteFile(Inbox, "m.json", []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	put(t, d, Inbox, ".hidden.json", "x")
	put(t, d, Inbox, "notes.txt", "x")
	if got := names(t, d.StagePath(Inbox)); strings.Join(got, ",") != ".hidden.json,m.json,m~2.json,m~3.json,notes.txt" {
		t.Fatalf("inbox = %v", got)
	}
	if n, err := d.Count(Inbox); err != nil || n != 3 {
		t.Fatalf("Count(inbox) = %d, %v; want 3", n, err)
	}
}

func TestEnqueueRefusesFIFOWithoutBlocking(t *testing.T) {
	d := newQueue(t)
	fifo := filepath.Join(t.TempDir(), "f.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Enqueue(fifo); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("Enqueue(fifo) err = %v, want ErrNotRegular", err)
	}
	if _, err := d.Enqueue(filepath.Join(t.TempDir(), "x.txt")); !errors.Is(err, ErrNotMessageName) {
		t.Fatalf("Enqueue(x.txt) err = %v, want ErrNotMessageName", err)
	}
}

// TestClaimInode: the inode of a claim identity, and of a batch file's
// record claim, is found again; other strings have none.
func TestClaimInode(t *testing.T) {
	for id, want := range map[string]uint64{
		"ab12-42@host:9987537:1796588987.630370138":    9987537,
		"ab12-42@host:9987537:1796588987.630370138#17": 9987537,
		"ab12-42@host:with:colons:77:1796588987.1":     77,
		"ab12-42@host":                0,
		"ab12-42@host:x:1796588987.1": 0,
		"ab12-42@host:0:1796588987.1": 0,
		"":                            0,
	} {
		got, ok := ClaimInode(id)
		if got != want || ok != (want != 0) {
			t.Errorf("ClaimInode(%q) = %d, %v; want %d", id, got, ok, want)
		}
	}
}

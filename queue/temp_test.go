//go:build linux

package queue

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A write into done/ or error/ keeps its temp file in the queue directory,
// never in the stage: a crash mid-write leaves it where a start sweeps.
func TestWriteFileTempOutsideHistory(t *testing.T) {
	d := newQueue(t)
	for _, s := range []Stage{Done, Error, Inbox} {
		var during []string
		_, err := d.writeFrom(s, "m.json", func(w io.Writer) error {
			for _, dir := range []string{d.Path(), d.StagePath(s)} {
				for _, n := range names(t, dir) {
					if strings.HasPrefix(n, TempPrefix) {
						rel, _ := filepath.Rel(d.Path(), filepath.Join(dir, n))
						during = append(during, rel)
					}
				}
			}
			_, err := io.WriteString(w, "{}")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		want := "."
		if s == Inbox {
			want = string(Inbox)
		}
		if len(during) != 1 || filepath.Dir(during[0]) != want {
			t.Errorf("writing into %s/: temp files %q, want one in %s", s, during, want)
		}
		if got := names(t, d.StagePath(s)); !slices.Equal(got, []string{"m.json"}) {
			t.Errorf("%s/ holds %q after the write, want only m.json", s, got)
		}
	}
	for _, n := range names(t, d.Path()) {
		if strings.HasPrefix(n, TempPrefix) {
			t.Errorf("the queue directory still holds %s", n)
		}
	}
}

// A start's sweep (RemoveStaleTemps) reads the queue directory and inbox/
// only; temp files of older versions in done/ and error/ are listed by
// Temps and removed by RemoveAllStaleTemps.
func TestRemoveStaleTempsScope(t *testing.T) {
	d := newQueue(t)
	old := time.Now().Add(-time.Hour)
	stale := map[string]Stage{".spool-tmp-r": "", ".spool-tmp-i": Inbox, ".spool-tmp-d": Done, ".spool-tmp-e": Error}
	for name, s := range stale {
		p := filepath.Join(d.Path(), string(s), name)
		if err := os.WriteFile(p, []byte("half"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	temps, err := d.Temps()
	if err != nil {
		t.Fatal(err)
	}
	if len(temps) != 4 {
		t.Fatalf("Temps found %v, want the 4", temps)
	}
	paths := func(ts []Temp) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Path())
		}
		slices.Sort(out)
		return out
	}
	removed, err := d.RemoveStaleTemps()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := paths(removed), []string{".spool-tmp-r", "inbox/.spool-tmp-i"}; !slices.Equal(got, want) {
		t.Errorf("RemoveStaleTemps removed %q, want %q", got, want)
	}
	removed, err = d.RemoveAllStaleTemps()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := paths(removed), []string{"done/.spool-tmp-d", "error/.spool-tmp-e"}; !slices.Equal(got, want) {
		t.Errorf("RemoveAllStaleTemps removed %q, want %q", got, want)
	}
}

// A start's sweep allocates nothing per file of the queue's history, and
// its listing of inbox/ nothing per waiting message: it reads in chunks
// into one buffer. (Allocations are counted, not timed.)
func TestSweepMemoryFlat(t *testing.T) {
	d := newQueue(t)
	sweep := func() float64 {
		return testing.AllocsPerRun(3, func() {
			if _, err := d.RemoveStaleTemps(); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Temps(); err != nil {
				t.Fatal(err)
			}
		})
	}
	empty := sweep()
	for _, s := range []Stage{Inbox, Done, Error} {
		for i := range 3000 {
			f, err := os.Create(filepath.Join(d.StagePath(s), "m"+strconv.Itoa(i)+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if full := sweep(); full > empty+10 {
		t.Errorf("the sweeps allocate %.0f times with 3000 files in each stage, %.0f on an empty queue", full, empty)
	}
}

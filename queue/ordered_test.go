//go:build linux

package queue

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// putNames creates empty message files for names, plus entries that are
// not messages, in a shuffled order.
func putNames(t *testing.T, d *Dir, names []string) {
	t.Helper()
	shuffled := slices.Clone(names)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, n := range shuffled {
		put(t, d, Inbox, n, "{}")
	}
	for _, n := range []string{".hidden.json", "notes.txt", "x.json.tmp", ".json"} {
		put(t, d, Inbox, n, "")
	}
}

func messageNames(n int) []string {
	if n > 1_000_000 {
		panic("messageNames: at most 1 000 000 distinct names")
	}
	var out []string
	for i := range n {
		// Not all the same length, so that the order is not just that of
		// the numbers' widths; distinct, as i is below the multiplier (at
		// 1 000 two names of 1 500 could be the same, and the test then
		// wanted a name twice).
		out = append(out, fmt.Sprintf("%0*d-order.json", 3+i%3, rand.IntN(1_000_000)*1_000_000+i))
	}
	slices.Sort(out)
	return out
}

// takeAll scans like a consumer: every name delivered is claimed (here:
// removed), so that the next window's read no longer sees it.
func takeAll(t *testing.T, d *Dir, w window) (got []string, chunks [][]string) {
	t.Helper()
	err := d.scanOrdered(Inbox, w, func(names []string) error {
		if len(names) == 0 || len(names) > ScanChunk {
			t.Errorf("chunk of %d names", len(names))
		}
		chunks = append(chunks, slices.Clone(names))
		for _, n := range names {
			got = append(got, n)
			if err := os.Remove(filepath.Join(d.StagePath(Inbox), n)); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, chunks
}

func TestScanOrderedWindows(t *testing.T) {
	for _, tc := range []struct{ n, window int }{
		{0, 8}, {1, 8}, {7, 8}, {8, 8}, {9, 8}, {100, 8}, {1500, 1000}, {1300, ScanChunk},
	} {
		t.Run(fmt.Sprintf("n=%d,window=%d", tc.n, tc.window), func(t *testing.T) {
			d := newQueue(t)
			want := messageNames(tc.n)
			putNames(t, d, want)
			got, _ := takeAll(t, d, window{tc.window, ScanWindowBytes})
			if !slices.Equal(got, want) {
				t.Fatalf("delivered %d names, want %d in name order\n got %q\nwant %q", len(got), len(want), got, want)
			}
		})
	}
}

// A backlog of more than maxWindows windows is taken in order for
// maxWindows windows, then in directory order; every name once.
func TestScanOrderedFallsBackPastMaxWindows(t *testing.T) {
	d := newQueue(t)
	const size = 4
	want := messageNames(maxWindows*size*3 + 5)
	putNames(t, d, want)
	got, _ := takeAll(t, d, window{4, ScanWindowBytes})
	if len(got) != len(want) {
		t.Fatalf("delivered %d names, want %d", len(got), len(want))
	}
	// The first window is the smallest names, in order.
	if !slices.Equal(got[:size], want[:size]) {
		t.Errorf("first window %q, want %q", got[:size], want[:size])
	}
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	if !slices.Equal(sorted, want) || len(slices.Compact(sorted)) != len(want) {
		t.Errorf("not every name exactly once: %q", got)
	}
}

// Names that are not claimed (another consumer's, a busy one) are not
// delivered twice by one scan, even across the fallback.
func TestScanOrderedEachNameOnce(t *testing.T) {
	for _, n := range []int{10, maxWindows*4 + 3} {
		d := newQueue(t)
		want := messageNames(n)
		putNames(t, d, want)
		var got []string
		err := d.scanOrdered(Inbox, window{4, ScanWindowBytes}, func(names []string) error {
			got = append(got, names...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		sorted := slices.Clone(got)
		slices.Sort(sorted)
		if !slices.Equal(sorted, want) {
			t.Errorf("n=%d: delivered %d names (%d distinct), want each of %d once", n, len(got), len(slices.Compact(sorted)), len(want))
		}
	}
}

// A name that sorts before the last one delivered and arrives during the
// scan waits for the next scan; one that sorts after it is taken now.
func TestScanOrderedLateArrivals(t *testing.T) {
	d := newQueue(t)
	want := messageNames(20)
	putNames(t, d, want)
	added := false
	var got []string
	err := d.scanOrdered(Inbox, window{5, ScanWindowBytes}, func(names []string) error {
		got = append(got, names...)
		for _, n := range names {
			os.Remove(filepath.Join(d.StagePath(Inbox), n))
		}
		if !added {
			added = true
			put(t, d, Inbox, "0-early.json", "{}")
			put(t, d, Inbox, "999999999999-late.json", "{}")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(got, "0-early.json") || !slices.Contains(got, "999999999999-late.json") {
		t.Errorf("first scan delivered %q", got)
	}
	var next []string
	if err := d.ScanOrdered(Inbox, func(names []string) error { next = append(next, names...); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(next, []string{"0-early.json"}) {
		t.Errorf("second scan delivered %q, want the early arrival", next)
	}
}

func TestDirentParsingMatchesReaddir(t *testing.T) {
	d := newQueue(t)
	want := []string{"a.json", "заказ №1.json", "with space.json", "x.json", "long-" + fmt.Sprint(make([]int, 40)) + ".json"}
	for _, n := range want {
		put(t, d, Inbox, n, "{}")
	}
	got, more, err := d.smallest(Inbox, window{100, ScanWindowBytes}, "")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if more != 0 || !slices.Equal(got, want) {
		t.Errorf("smallest = %q (more %d), want %q", got, more, want)
	}
}

// Long names fill the byte bound before the count bound: fewer names are
// held at once, still in order, and every name is delivered once.
func TestScanOrderedByteBound(t *testing.T) {
	d := newQueue(t)
	var want []string
	for i := range 120 {
		// Lengths from 14 to about 200 bytes, in no relation to the order.
		want = append(want, fmt.Sprintf("%06d-%s.json", rand.IntN(1_000_000)*1000+i, strings.Repeat("x", rand.IntN(190))))
	}
	slices.Sort(want)
	putNames(t, d, want)
	const budget = 1000
	held, _, err := d.smallest(Inbox, window{1000, budget}, "")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(held)
	n := 0
	for _, name := range held {
		n += len(name)
	}
	if n > budget || len(held) == 0 || len(held) == len(want) || !slices.Equal(held, want[:len(held)]) {
		t.Errorf("one read held %d names of %d bytes (bound %d), want the smallest of the %d names within the bound", len(held), n, budget, len(want))
	}
	got, _ := takeAll(t, d, window{1000, budget})
	if !slices.Equal(got, want) {
		t.Fatalf("delivered %d names, want %d in name order", len(got), len(want))
	}
}

package batch

import (
	"compress/gzip"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/testenv"
)

// generated is a batch file of size bytes made as it is read: records of
// about 100 bytes, and every 64 MiB a record just under the limit and one
// far over it, so that the window grows to its most and a record is
// dropped as it passes. The big notes are two slices written in pieces,
// so that the generator itself holds little.
type generated struct {
	kind      string
	size, off int64
	n         int64 // records written
	tooLarge  int64 // records written over the limit
	parts     [][]byte
	big       int64 // the offset of the next big records
	closed    bool
}

var (
	underLimit = []byte(strings.Repeat("n", 1000<<10))
	overLimit  = []byte(strings.Repeat("o", 3<<20))
)

func newGenerated(kind string, size int64) *generated {
	g := &generated{kind: kind, size: size, big: 1 << 20}
	switch kind {
	case CSV:
		g.parts = append(g.parts, []byte("msg_id,order_no,seq,amount,note\n"))
	case XML:
		g.parts = append(g.parts, []byte("<Orders>\n"))
	}
	return g
}

func (g *generated) Read(p []byte) (int, error) {
	for len(g.parts) == 0 {
		switch {
		case g.off >= g.size && g.closed:
			return 0, io.EOF
		case g.off >= g.size:
			g.closed = true
			if g.kind == XML {
				g.parts = append(g.parts, []byte("</Orders>\n"))
			}
		case g.off >= g.big:
			g.big += 64 << 20
			g.add(underLimit)
			g.add(overLimit)
			g.tooLarge++
		default:
			g.add(nil)
		}
	}
	n := copy(p, g.parts[0])
	if g.parts[0] = g.parts[0][n:]; len(g.parts[0]) == 0 {
		g.parts = g.parts[1:]
	}
	g.off += int64(n)
	return n, nil
}

// add queues a record, with a note of its own unless note is given.
func (g *generated) add(note []byte) {
	g.n++
	id := strconv.FormatInt(g.n, 10)
	if note == nil {
		note = []byte("a note for record " + id)
	}
	var head, tail string
	switch g.kind {
	case JSONL:
		head, tail = fmt.Sprintf(`{"msg_id":"%s","order_no":"A-%s","seq":1,"amount":"12.50","note":"`, id, id), "\"}\n"
	case CSV:
		head, tail = fmt.Sprintf(`%s,A-%s,1,12.50,"`, id, id), ", quoted\"\n"
	case XML:
		head, tail = fmt.Sprintf(`<Order id="%s"><order_no>A-%s</order_no><amount>12.50</amount><note>`, id, id), "</note></Order>\n"
	}
	g.parts = append(g.parts, []byte(head), note, []byte(tail))
}

// gzipped is r gzipped on the fly.
func gzipped(r io.Reader) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		zw, _ := gzip.NewWriterLevel(pw, gzip.BestSpeed)
		_, err := io.Copy(zw, r)
		if err == nil {
			err = zw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// TestBoundedMemory streams a large file of each format through a
// Reader and checks that the heap in use stays far under the 64 MiB
// phase 2 allows a consumer: memory follows the record limit, not the
// file (1 GiB each with SPOOL_TEST_LONG=1). The heap holds the
// generator's two big notes (4 MiB) and, for gzip, the compressor; an
// XML record near the limit costs about five times its size while it is
// parsed (the decoder's buffer, the element's text, the JSON).
func TestBoundedMemory(t *testing.T) {
	// size is long with SPOOL_TEST_LONG=1, but under the race detector,
	// which would take ten minutes over the long sizes.
	size := func(long, quick int64) int64 {
		if raceEnabled {
			return quick / 4
		}
		return testenv.Pick(long, quick)
	}
	const bound = 32 << 20
	for _, c := range []struct {
		kind string
		name string
		size int64
		f    Format
	}{
		{JSONL, "big.jsonl", size(1<<30, 200<<20), Format{Kind: JSONL}},
		{CSV, "big.csv", size(1<<30, 200<<20), Format{Kind: CSV}},
		{CSV, "big.csv.gz", size(1<<30, 64<<20), Format{Kind: CSV}},
		{XML, "big.xml", size(256<<20, 32<<20), Format{Kind: XML, Record: "Order"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newGenerated(c.kind, c.size)
			var src io.Reader = g
			if strings.HasSuffix(c.name, ".gz") {
				src = gzipped(g)
			}
			r, err := Open(src, c.name, c.f)
			if err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			var ms runtime.MemStats
			var peak uint64
			var n, tooLarge, failed int64
			var last int64
			for {
				rec, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case rec.Err != nil && rec.Err.Reason == "too-large":
					tooLarge++
				case rec.Err != nil:
					if failed++; failed < 5 {
						t.Errorf("%s: %v", rec.Origin(), rec.Err)
					}
				}
				if rec.Start < last {
					t.Fatalf("record %d starts at %d, before %d", rec.Index, rec.Start, last)
				}
				last = rec.End
				if n++; n%20000 == 0 {
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapInuse)
				}
			}
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			if n != g.n || tooLarge != g.tooLarge || tooLarge == 0 || last != g.off && c.kind != XML {
				t.Errorf("%d records (%d too large) to offset %d, want %d (%d) to %d", n, tooLarge, last, g.n, g.tooLarge, g.off)
			}
			t.Logf("%s: %d MiB, %d records, peak heap in use %.1f MiB", c.name, c.size>>20, n, float64(peak)/(1<<20))
			if peak > bound {
				t.Errorf("peak heap in use %d MiB, over %d MiB", peak>>20, bound>>20)
			}
		})
	}
}

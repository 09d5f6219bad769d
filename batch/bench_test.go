package batch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"

	"golang.org/x/text/encoding/htmlindex"
)

// benchRecords is how many records a benchmark's file has.
const benchRecords = 100_000

// benchFile returns a file of benchRecords records of kind, about 110
// bytes each, read whole into memory so that only the reader is timed.
func benchFile(b *testing.B, kind string) []byte {
	b.Helper()
	g := newGenerated(kind, 1<<40)
	g.big = 1 << 62 // no big records
	var buf bytes.Buffer
	for g.n < benchRecords {
		g.add(nil)
		for _, p := range g.parts {
			buf.Write(p)
		}
		g.parts = g.parts[:0]
	}
	if kind == XML {
		buf.WriteString("</Orders>\n")
	}
	return buf.Bytes() // with the CSV header or the XML root newGenerated queued first
}

// BenchmarkRead reads a file of 100 000 records per op and reports
// records per second, and the allocations and bytes allocated per
// record (the ones Record owns included).
func BenchmarkRead(b *testing.B) {
	sjis, _ := htmlindex.Get("shift_jis")
	for _, c := range []struct {
		name string
		kind string
		file string
		f    Format
		enc  func([]byte) []byte
	}{
		{"jsonl", JSONL, "b.jsonl", Format{Kind: JSONL}, nil},
		{"csv", CSV, "b.csv", Format{Kind: CSV}, nil},
		{"xml", XML, "b.xml", Format{Kind: XML, Record: "Order"}, nil},
		{"jsonl.gz", JSONL, "b.jsonl.gz", Format{Kind: JSONL}, func(d []byte) []byte { return gz(b, d) }},
		{"csv-shift_jis", CSV, "b.csv", Format{Kind: CSV, Encoding: "shift_jis"}, func(d []byte) []byte {
			// Every note in Japanese, so that every record is decoded.
			d = bytes.ReplaceAll(d, []byte("a note for record"), []byte("注文の備考"))
			out, err := sjis.NewEncoder().Bytes(d)
			if err != nil {
				b.Fatal(err)
			}
			return out
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			data := benchFile(b, c.kind)
			if c.enc != nil {
				data = c.enc(data)
			}
			b.SetBytes(int64(len(data)))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for range b.N {
				r, err := Open(bytes.NewReader(data), c.file, c.f)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					rec, err := r.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil || rec.Err != nil {
						b.Fatalf("%v %v", err, rec.Err)
					}
					n++
				}
				if n != benchRecords {
					b.Fatalf("%d records", n)
				}
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			records := float64(b.N) * benchRecords
			b.ReportMetric(records/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/records, "allocs/record")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/records, "B/record")
		})
	}
}

// BenchmarkKey is the hashed key of a CSV record's JSON.
func BenchmarkKey(b *testing.B) {
	obj := []byte(`{"msg_id":"12345","order_no":"A-12345","seq":"1","amount":"12.50","note":"a note for record 12345"}`)
	b.ReportAllocs()
	for range b.N {
		if _, err := Key(obj); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCSVWideHeader reads the header of a CSV of 100 000 columns and
// its one row: the header's names are checked for one given twice in a
// set (a look back at each name took 17 s here).
func BenchmarkCSVWideHeader(b *testing.B) {
	var head, row bytes.Buffer
	for i := range 100_000 {
		if i > 0 {
			head.WriteByte(',')
			row.WriteByte(',')
		}
		fmt.Fprintf(&head, "c%d", i)
	}
	data := append(append(head.Bytes(), '\n'), append(row.Bytes(), '\n')...)
	for b.Loop() {
		recs := readAll(b, "w.csv", data, Format{Kind: CSV, MaxSize: 4 << 20})
		if len(recs) != 1 || recs[0].Err != nil {
			b.Fatalf("%d records, want the row: %v", len(recs), recs)
		}
	}
}

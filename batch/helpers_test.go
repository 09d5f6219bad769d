package batch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readAll reads every record of data as the file name of format f.
func readAll(t testing.TB, name string, data []byte, f Format) []Record {
	t.Helper()
	recs, err := readFrom(bytes.NewReader(data), name, f, Position{})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// readFrom reads the records of src after position p.
func readFrom(src io.Reader, name string, f Format, p Position) ([]Record, error) {
	r, err := Open(src, name, f)
	if err != nil {
		return nil, err
	}
	if err := r.Resume(p); err != nil {
		return nil, err
	}
	var recs []Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
		recs = append(recs, rec)
		if len(recs) > 10_000_000 {
			return recs, errors.New("runaway reader")
		}
	}
}

// want is what a test expects of one record: where it starts, its JSON
// when it reads, or a piece of its failure's detail.
type want struct {
	line, element int64
	json          string
	err           string // a substring of Err.Detail; "" for a record that reads
	tail          bool
}

// ok expects a record that reads, on line, as json.
func ok(line int64, json string) want { return want{line: line, json: json} }

// bad expects a record that fails on line with detail holding err.
func bad(line int64, err string) want { return want{line: line, err: err} }

// checkRecords compares records with wants, and checks what holds for
// every reader: indexes in order, JSON or Err, ranges that follow one
// another, Raw the bytes of the range.
func checkRecords(t *testing.T, data []byte, recs []Record, wants []want) {
	t.Helper()
	if len(recs) != len(wants) {
		t.Errorf("%d records, want %d:\n%s", len(recs), len(wants), describeAll(recs))
		return
	}
	for i, rec := range recs {
		w := wants[i]
		var got string
		if rec.Err != nil {
			got = rec.Err.Detail
		}
		switch {
		case rec.Line != w.line || rec.Element != w.element:
			t.Errorf("record %d at line %d element %d, want line %d element %d", i, rec.Line, rec.Element, w.line, w.element)
		case w.err == "" && rec.Err != nil:
			t.Errorf("record %d failed: %v", i, rec.Err)
		case w.err == "" && string(rec.JSON) != w.json:
			t.Errorf("record %d JSON:\n got %s\nwant %s", i, rec.JSON, w.json)
		case w.err != "" && (rec.Err == nil || !strings.Contains(got, w.err)):
			t.Errorf("record %d: got %q (JSON %s), want a failure with %q", i, got, rec.JSON, w.err)
		case rec.Tail != w.tail:
			t.Errorf("record %d Tail %v, want %v", i, rec.Tail, w.tail)
		}
	}
	checkInvariants(t, data, recs)
}

// checkInvariants checks what every reader's records must satisfy.
func checkInvariants(t testing.TB, data []byte, recs []Record) {
	t.Helper()
	var end int64
	for i, rec := range recs {
		switch {
		case rec.Index != int64(i):
			t.Errorf("record %d has index %d", i, rec.Index)
		case rec.Start < end || rec.End < rec.Start:
			t.Errorf("record %d spans [%d,%d) after the previous ended at %d", i, rec.Start, rec.End, end)
		case rec.After().Offset != rec.End || rec.After().Record != rec.Index+1:
			t.Errorf("record %d: next %+v, end %d", i, rec.After(), rec.End)
		case (rec.Err == nil) == (rec.JSON == nil):
			t.Errorf("record %d: Err %v and JSON %q", i, rec.Err, rec.JSON)
		case rec.Err != nil && rec.Err.Detail == "":
			t.Errorf("record %d fails without a detail", i)
		case rec.Tail && i != len(recs)-1:
			t.Errorf("record %d is a tail, and records follow it", i)
		case rec.Whole && (!rec.Tail || i != 0):
			t.Errorf("record %d is whole: tail %v", i, rec.Tail)
		}
		if data != nil && rec.Raw != nil && (rec.End > int64(len(data)) || !bytes.Equal(rec.Raw, data[rec.Start:rec.End])) {
			t.Errorf("record %d: Raw %q is not the bytes [%d,%d) of the file", i, rec.Raw, rec.Start, rec.End)
		}
		end = rec.End
	}
}

func describeAll(recs []Record) string {
	var b strings.Builder
	for _, rec := range recs {
		fmt.Fprintf(&b, "  #%d line %d element %d [%d,%d) tail %v json %s err %v\n", rec.Index, rec.Line, rec.Element, rec.Start, rec.End, rec.Tail, rec.JSON, rec.Err)
	}
	return b.String()
}

// testdata reads a file of testdata/.
func testdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// noSeek hides a reader's Seek, as a pipe or a socket would.
type noSeek struct{ r io.Reader }

func (n noSeek) Read(p []byte) (int, error) { return n.r.Read(p) }

// oneByte returns a byte at a time, the worst a reader may do.
type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

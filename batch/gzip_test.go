package batch

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

func gz(t testing.TB, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// testFiles are the plain files the gzip and resume tests read.
var testFiles = []struct {
	file string
	f    Format
}{
	{"orders.csv", Format{Kind: CSV}},
	{"orders.jsonl", Format{Kind: JSONL}},
	{"orders.xml", Format{Kind: XML, Record: "Order"}},
}

func sameRecord(a, b Record) bool {
	return a.Index == b.Index && a.Line == b.Line && a.Element == b.Element && a.Start == b.Start && a.End == b.End &&
		bytes.Equal(a.Raw, b.Raw) && bytes.Equal(a.JSON, b.JSON) && (a.Err == nil) == (b.Err == nil) &&
		(a.Err == nil || *a.Err == *b.Err) && a.Tail == b.Tail && a.next == b.next &&
		slices.EqualFunc(a.scope, b.scope, func(x, y xmlnsDecl) bool { return bytes.Equal(x.text, y.text) })
}

func TestGzip(t *testing.T) {
	for _, tf := range testFiles {
		t.Run(tf.file, func(t *testing.T) {
			data := testdata(t, tf.file)
			plain := readAll(t, tf.file, data, tf.f)
			z := gz(t, data)
			got := readAll(t, tf.file+".gz", z, tf.f)
			if len(got) != len(plain) {
				t.Fatalf("%d records gzipped, %d plain", len(got), len(plain))
			}
			for i := range got {
				if !sameRecord(got[i], plain[i]) {
					t.Errorf("record %d gzipped:\n%s\nplain:\n%s", i, describeAll(got[i:i+1]), describeAll(plain[i:i+1]))
				}
			}
			// Two gzip members are one stream, as gzip -d reads them.
			half := len(data) / 2
			two := append(gz(t, data[:half]), gz(t, data[half:])...)
			if got := readAll(t, tf.file+".gz", two, tf.f); len(got) != len(plain) {
				t.Errorf("two members: %d records, want %d", len(got), len(plain))
			}
		})
	}
}

// TestGzipTruncated cuts a gzipped file at every length: the records
// before the cut read as in the whole file, then one failure names the
// damage and holds the rest; with no record before it, it is the whole
// file's. Nothing is an error of Next: the content is damaged, not the
// reading.
func TestGzipTruncated(t *testing.T) {
	for _, tf := range testFiles {
		t.Run(tf.file, func(t *testing.T) {
			data := testdata(t, tf.file)
			plain := readAll(t, tf.file, data, tf.f)
			z := gz(t, data)
			for cut := 0; cut < len(z); cut++ {
				got := readAll(t, tf.file+".gz", z[:cut], tf.f)
				if len(got) == 0 {
					t.Fatalf("cut at %d: no record", cut)
				}
				last := got[len(got)-1]
				if !last.Tail || last.Err == nil || !strings.Contains(last.Err.Detail, "gzip") {
					t.Fatalf("cut at %d: the last record is not the gzip failure:\n%s", cut, describeAll(got))
				}
				if last.Whole != (len(got) == 1) {
					t.Errorf("cut at %d: Whole %v with %d records", cut, last.Whole, len(got))
				}
				for i, rec := range got[:len(got)-1] {
					if !sameRecord(rec, plain[i]) {
						t.Fatalf("cut at %d: record %d differs:\n%s\nplain:\n%s", cut, i, describeAll(got[i:i+1]), describeAll(plain[i:i+1]))
					}
				}
				checkInvariants(t, data, got)
			}
		})
	}
}

func TestGzipDamage(t *testing.T) {
	data := append(testdata(t, "orders.jsonl"), '\n') // its last line ends, and the checksum's failure is a tail of its own
	z := gz(t, data)
	f := Format{Kind: JSONL}

	crc := bytes.Clone(z)
	crc[len(crc)-8] ^= 0xFF // the CRC-32 in the trailer
	got := readAll(t, "o.jsonl.gz", crc, f)
	plain := readAll(t, "o.jsonl", data, f)
	if n := len(got); n != len(plain)+1 || got[n-1].Start != got[n-1].End || !strings.Contains(got[n-1].Err.Detail, "checksum does not match") {
		t.Errorf("bad checksum:\n%s", describeAll(got))
	}

	got = readAll(t, "o.jsonl.gz", data, f)
	if len(got) != 1 || !got[0].Whole || got[0].Err.Detail != "not a gzip file (invalid gzip header)" {
		t.Errorf("not gzip:\n%s", describeAll(got))
	}
	// Shorter than gzip's header: not gzip by its first bytes, or a
	// stream cut in its header.
	for _, short := range []struct{ data, detail string }{
		{"garbage", "not a gzip file (invalid gzip header)"},
		{"g", "not a gzip file (invalid gzip header)"},
		{"\x1fx", "not a gzip file (invalid gzip header)"},
		{string(z[:5]), "the gzip stream is truncated after 0 bytes of content"},
		{string(z[:1]), "the gzip stream is truncated after 0 bytes of content"},
	} {
		if got := readAll(t, "s.jsonl.gz", []byte(short.data), f); len(got) != 1 || !got[0].Whole || got[0].Err.Detail != short.detail {
			t.Errorf("%q:\n%s\nwant %q", short.data, describeAll(got), short.detail)
		}
	}
	if d := (&Reader{name: "o.jsonl.gz", kind: JSONL}).DeadLetter(got[0]); !d.Whole || d.Name != "o.jsonl.gz" {
		t.Errorf("not gzip: dead letter %+v, want the file itself", d)
	}

	mid := bytes.Clone(z)
	for i := 20; i < len(mid)-10; i++ {
		mid[i] ^= 0x55
	}
	got = readAll(t, "o.jsonl.gz", mid, f)
	if last := got[len(got)-1]; !last.Tail || !strings.Contains(last.Err.Detail, "gzip") {
		t.Errorf("corrupt:\n%s", describeAll(got))
	}
}

// failing returns its data, then err.
type failing struct {
	data []byte
	err  error
}

func (f *failing) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// TestReadError: a failure to read the file is Next's error, never a
// record: the file is not known to be bad. It stays.
func TestReadError(t *testing.T) {
	eio := errors.New("input/output error")
	data := testdata(t, "orders.jsonl")
	for _, c := range []struct {
		name string
		src  []byte
	}{{"o.jsonl", data}, {"o.jsonl.gz", gz(t, data)}} {
		r, err := Open(&failing{data: c.src[:len(c.src)/2], err: eio}, c.name, Format{Kind: JSONL})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		for {
			rec, err := r.Next()
			if err != nil {
				if !errors.Is(err, eio) {
					t.Errorf("%s: %v, want the read error", c.name, err)
				}
				if _, again := r.Next(); !errors.Is(again, eio) {
					t.Errorf("%s: then %v", c.name, again)
				}
				break
			}
			if rec.Tail {
				t.Errorf("%s: a failure %v instead of the read error", c.name, rec.Err)
			}
			if n++; n > 100 {
				t.Fatal("no error")
			}
		}
	}
	if _, err := readFrom(&failing{err: io.ErrUnexpectedEOF}, "x.csv", Format{Kind: CSV}, Position{}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("csv: %v", err)
	}
}

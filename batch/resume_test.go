package batch

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"testing"
)

// resumeFiles are the files the resume tests read: every file of
// testdata/ with its format.
func resumeFiles(t *testing.T) []struct {
	file string
	data []byte
	f    Format
} {
	var files []struct {
		file string
		data []byte
		f    Format
	}
	for _, tf := range testFiles {
		files = append(files, struct {
			file string
			data []byte
			f    Format
		}{tf.file, testdata(t, tf.file), tf.f})
	}
	for _, ef := range encodedFiles {
		files = append(files, struct {
			file string
			data []byte
			f    Format
		}{ef.file, testdata(t, filepath.Join("enc", ef.file)), ef.f})
	}
	return files
}

// TestResumeEveryBoundary reads each file whole, then resumes a new
// reader at the position after each record, by every path (a seekable
// file, a pipe, a byte at a time, gzip): the records read after the
// resume are exactly the rest of the whole read's.
func TestResumeEveryBoundary(t *testing.T) {
	for _, tf := range resumeFiles(t) {
		t.Run(tf.file, func(t *testing.T) {
			all := readAll(t, tf.file, tf.data, tf.f)
			z := gz(t, tf.data)
			for i := -1; i < len(all); i++ {
				p, rest := Position{}, all
				if i >= 0 {
					p, rest = all[i].After(), all[i+1:]
				}
				for _, src := range []struct {
					how  string
					name string
					r    io.Reader
				}{
					{"seek", tf.file, bytes.NewReader(tf.data)},
					{"pipe", tf.file, noSeek{bytes.NewReader(tf.data)}},
					{"bytes", tf.file, oneByte{bytes.NewReader(tf.data)}},
					{"gzip", tf.file + ".gz", bytes.NewReader(z)},
				} {
					got, err := readFrom(src.r, src.name, tf.f, p)
					if err != nil {
						t.Fatalf("%s: resume after record %d at %+v: %v", src.how, i, p, err)
					}
					if len(got) != len(rest) {
						t.Fatalf("%s: after record %d, %d records, want %d:\n%s", src.how, i, len(got), len(rest), describeAll(got))
					}
					for k := range got {
						if !sameRecord(got[k], rest[k]) {
							t.Fatalf("%s: after record %d, record %d:\n%s\nwant:\n%s", src.how, i, k, describeAll(got[k:k+1]), describeAll(rest[k:k+1]))
						}
					}
				}
			}
		})
	}
}

// TestResumeRefusesStrangers: a position that is no record boundary of
// the file is refused, wrapping ErrPosition, rather than read from.
func TestResumeRefusesStrangers(t *testing.T) {
	for _, tf := range resumeFiles(t) {
		all := readAll(t, tf.file, tf.data, tf.f)
		p := all[0].After()
		for _, c := range []struct {
			name string
			p    Position
			pipe bool // only the paths that read from the start can tell
		}{
			{"inside a record", Position{Record: p.Record, Offset: p.Offset + 1, Line: p.Line}, false},
			{"past the end", Position{Record: p.Record, Offset: int64(len(tf.data)) + 10, Line: p.Line}, false},
			{"wrong line", Position{Record: p.Record, Offset: p.Offset, Line: p.Line + 1}, true},
			{"wrong index", Position{Record: p.Record + 1, Offset: p.Offset, Line: p.Line}, true},
			{"too many records", Position{Record: int64(len(all)) + 1, Offset: p.Offset, Line: p.Line}, true},
			{"negative", Position{Record: -1}, false},
		} {
			if c.name == "inside a record" && p.Offset+1 < int64(len(tf.data)) && tf.data[p.Offset] == '\n' {
				continue // the next byte ends a line: a boundary of a seekable file
			}
			for _, src := range []io.Reader{bytes.NewReader(tf.data), noSeek{bytes.NewReader(tf.data)}} {
				if _, seekable := src.(io.Seeker); seekable && c.pipe && tf.f.Kind != XML {
					continue
				}
				r, err := Open(src, tf.file, tf.f)
				if err != nil {
					t.Fatal(err)
				}
				if err := r.Resume(c.p); !errors.Is(err, ErrPosition) {
					t.Errorf("%s %s (%T): resume at %+v: %v, want ErrPosition", tf.file, c.name, src, c.p, err)
				}
			}
		}
		r, _ := Open(bytes.NewReader(tf.data), tf.file, tf.f)
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		if err := r.Resume(p); err == nil {
			t.Errorf("%s: resume after Next passed", tf.file)
		}
	}
}

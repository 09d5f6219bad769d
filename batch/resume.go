package batch

import (
	"errors"
	"fmt"
	"io"
)

// ErrPosition is wrapped by Resume for a position that is not one of the
// file's record boundaries: a Position of another file, or of this name
// before the file was replaced.
var ErrPosition = errors.New("not a record boundary of this file")

// Resume moves a new Reader to p, the Position of a record of the same
// file (Record.After), so that Next goes on with the record after it,
// numbered and placed as a reader that never stopped would number them.
// The zero Position is the start of the file. Call it before the first
// Next.
//
// A plain (not gzipped) JSON Lines or CSV file whose reader is an
// io.Seeker is sought to p.Offset: its header and byte order mark are
// read again from the start, and the byte before p.Offset must end a line.
// Any other file is read again from its start to p, records split but
// not decoded or converted, and p must be where a record ends, at that
// record's index and line: an XML file needs the elements open around
// its records, which only reading the start gives back. It costs a read
// of the file up to p, in bounded memory as ever.
func (r *Reader) Resume(p Position) error {
	if r.started {
		return fmt.Errorf("resume %s: the reader has read already", r.name)
	}
	if p == (Position{}) {
		return nil
	}
	if p.Record < 1 || p.Offset < 0 || p.Line < 1 {
		return fmt.Errorf("resume %s at %+v: %w", r.name, p, ErrPosition)
	}
	if sk, ok := r.src.file.r.(io.Seeker); ok && !r.src.decoded() && (r.kind == JSONL || r.kind == CSV) {
		return r.seek(sk, p)
	}
	r.light = true
	defer func() { r.light = false }()
	var last Record
	for r.index < p.Record {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("resume %s at %+v: the file has %d records: %w", r.name, p, r.index, ErrPosition)
		}
		if err != nil {
			return fmt.Errorf("resume %s: %w", r.name, err)
		}
		last = rec
	}
	if last.next != p {
		return fmt.Errorf("resume %s at %+v: record %d ends at %+v: %w", r.name, p, p.Record-1, last.next, ErrPosition)
	}
	return nil
}

// seek resumes a plain JSON Lines or CSV file at p by seeking.
func (r *Reader) seek(sk io.Seeker, p Position) error {
	r.started = true
	rec, err := r.start()
	if err != nil {
		return fmt.Errorf("resume %s: %w", r.name, err)
	}
	if rec != nil {
		// The file cannot be read at all: its one position is after its
		// one failure.
		if rec.next != p {
			return fmt.Errorf("resume %s at %+v: the file is one failure: %w", r.name, p, ErrPosition)
		}
		r.index, r.done = 1, true
		return nil
	}
	if p.Offset <= r.src.offset() {
		return fmt.Errorf("resume %s at %+v: before the first record: %w", r.name, p, ErrPosition)
	}
	if _, err := sk.Seek(p.Offset-1, io.SeekStart); err != nil {
		return fmt.Errorf("resume %s: %w", r.name, err)
	}
	s := r.src
	s.base, s.lo, s.hi, s.eof = p.Offset-1, 0, 0, false
	for len(s.data()) == 0 && s.fill() {
	}
	if s.ioErr != nil {
		return fmt.Errorf("resume %s: %w", r.name, s.ioErr)
	}
	d := s.data()
	if len(d) == 0 {
		return fmt.Errorf("resume %s at %+v: past the end of the file: %w", r.name, p, ErrPosition)
	}
	s.consume(1)
	if d[0] != '\n' {
		// Only the end of a last line without a line feed is not after
		// one: nothing may follow it.
		for len(s.data()) == 0 && s.fill() {
		}
		if len(s.data()) > 0 {
			return fmt.Errorf("resume %s at %+v: not after a line feed: %w", r.name, p, ErrPosition)
		}
	}
	r.index, r.line = p.Record, p.Line
	return nil
}

package batch

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
)

// chunk is how much the window reads at a time, and its size before a
// long record makes it grow; minWindow is its size at first.
const (
	chunk     = 64 << 10
	minWindow = 4 << 10
)

// source is a file's (decompressed) bytes seen through a window that
// slides along them: the window holds the unit being split, from its
// first byte, and grows up to the record limit plus a chunk, never more,
// so that memory is bounded by the limit and not by the file.
type source struct {
	file *tracked  // the reader given to Open, its errors kept apart
	gz   bool      // the file is gzip, read through r
	u16  byteOrder // the file is UTF-16 of this byte order, decoded to UTF-8 through r
	r    io.Reader // what the window reads: the file, a gzip reader on it, a UTF-16 decoder on either
	// wrapped is set once r is the file's reader chain (gzip, UTF-16):
	// gzip reads its header at its start, which may fail.
	wrapped bool

	buf    []byte
	lo, hi int   // buf[lo:hi] is the data not consumed yet
	base   int64 // the stream offset of buf[0]
	max    int   // the most the window may hold

	eof    bool  // the stream ended where it should
	broken error // the stream cannot be read on: its content is damaged (gzip)
	ioErr  error // reading the file failed: nothing is known of its content
}

// tracked keeps the first error of the reader it wraps, so that an error
// of the gzip reader on top tells the file's I/O failure (not the
// message's fault, a reason to stop) from damaged content (a dead letter).
type tracked struct {
	r   io.Reader
	err error
}

func (t *tracked) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF && t.err == nil {
		t.err = err
	}
	return n, err
}

func newSource(r io.Reader, gz bool, u16 byteOrder, limit int64) *source {
	t := &tracked{r: r}
	return &source{file: t, gz: gz, u16: u16, r: t, max: int(min(limit, 1<<40)) + chunk}
}

// decoded reports whether the stream's offsets are not the file's, so
// that a resume cannot seek to them: a gzip or UTF-16 file.
func (s *source) decoded() bool { return s.gz || s.u16 != nil }

// data is the window's unconsumed bytes, from the read position.
func (s *source) data() []byte { return s.buf[s.lo:s.hi] }

// offset is the stream offset of the read position.
func (s *source) offset() int64 { return s.base + int64(s.lo) }

// consume moves the read position n bytes on.
func (s *source) consume(n int) { s.lo += n }

// ended reports that no more bytes will come: the stream ended, broke,
// or its file failed to read.
func (s *source) ended() bool { return s.eof || s.broken != nil || s.ioErr != nil }

// fill reads more bytes into the window, moving the unconsumed bytes to
// its front and growing it as needed. It reports false when no byte came
// because the stream has ended (ended tells how), or when the window is
// full at its maximum: the caller then drops bytes it no longer needs.
func (s *source) fill() bool {
	if s.ended() {
		return false
	}
	if s.lo > 0 && (s.hi == len(s.buf) || s.lo >= len(s.buf)/2) {
		n := copy(s.buf, s.buf[s.lo:s.hi])
		s.base += int64(s.lo)
		s.lo, s.hi = 0, n
	}
	// The window starts small, for the many small files, and doubles
	// once the stream has filled it, up to a chunk, and beyond only for
	// a unit that needs it.
	if s.hi == len(s.buf) || len(s.buf) < chunk && s.base+int64(s.hi) >= int64(len(s.buf)) {
		if len(s.buf) >= s.max {
			return false
		}
		size := min(max(minWindow, 2*len(s.buf)), s.max)
		nb := make([]byte, size)
		copy(nb, s.buf[s.lo:s.hi])
		s.base += int64(s.lo)
		s.buf, s.lo, s.hi = nb, 0, s.hi-s.lo
	}
	if !s.wrapped {
		if s.gz {
			// A file shorter than gzip's header is no truncated gzip
			// stream when its first bytes are not gzip's magic number.
			br := bufio.NewReader(s.file)
			magic, _ := br.Peek(2)
			for i, b := range magic {
				if b != gzipMagic[i] {
					s.fail(gzip.ErrHeader)
					return false
				}
			}
			zr, err := gzip.NewReader(br)
			if err == io.EOF {
				err = errEmptyGzip // no header: gzip -d says "unexpected end of file"
			}
			if err != nil {
				s.fail(err)
				return false
			}
			s.r = zr
		}
		if s.u16 != nil {
			s.r = newUTF16Reader(s.r, s.u16)
		}
		s.wrapped = true
	}
	for range 100 {
		n, err := s.r.Read(s.buf[s.hi:])
		s.hi += n
		if err != nil {
			s.fail(err)
		}
		if n > 0 || err != nil {
			return n > 0
		}
	}
	s.fail(io.ErrNoProgress)
	return false
}

// fail sorts a read error into the end of the stream, damaged content or
// a failure of the file itself.
func (s *source) fail(err error) {
	switch {
	case err == io.EOF:
		s.eof = true
	case s.file.err != nil:
		s.ioErr = s.file.err
	case s.gz:
		s.broken = err
	default:
		s.ioErr = err
	}
}

// gzipMagic is how every gzip stream starts (RFC 1952).
var gzipMagic = [2]byte{0x1f, 0x8b}

// errEmptyGzip is the failure of an empty file named like a gzip file.
var errEmptyGzip = errors.New("empty gzip file")

// brokenDetail says how the stream broke, for a RejectError's detail.
func (s *source) brokenDetail() string {
	switch {
	case s.broken == errEmptyGzip:
		return "not a gzip file (it is empty)"
	case errors.Is(s.broken, io.ErrUnexpectedEOF):
		return fmt.Sprintf("the gzip stream is truncated after %d bytes of content", s.base+int64(s.hi))
	case errors.Is(s.broken, gzip.ErrChecksum):
		return "the gzip stream's checksum does not match its content"
	case errors.Is(s.broken, gzip.ErrHeader):
		if s.base+int64(s.hi) == 0 {
			return "not a gzip file (invalid gzip header)"
		}
		return fmt.Sprintf("invalid gzip header after %d bytes of content", s.base+int64(s.hi))
	}
	return fmt.Sprintf("the gzip stream is corrupt after %d bytes of content: %v", s.base+int64(s.hi), s.broken)
}

package batch

import (
	"encoding/binary"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// UTF-16 is the one encoding spool reads whose ASCII characters are not
// single bytes, so its records cannot be split in the file's own bytes
// (charset.go). A UTF-16 file is decoded to UTF-8 as it is read instead,
// below gzip, like a gzip stream below the splitters: offsets are the
// decoded stream's, so a resume reads the file again from its start, and
// a record's dead letter is encoded back (appendUTF16, utf16Writer).
//
// Decoding keeps what is invalid: an unpaired surrogate comes out as its
// three bytes of generalized UTF-8 (ED A0 80 to ED BF BF), which no UTF-8
// reader takes, so its record fails (reason parse) as an invalid sequence
// of any other encoding does, and encoding its dead letter back writes
// the same code unit again. A lone last byte (a file of odd length) comes
// out as 0xFF, invalid too, and is written back as U+FFFD: the file
// is cut, and its last character cannot be restored.

// byteOrder is binary.LittleEndian or binary.BigEndian.
type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

// utf16Reader decodes UTF-16 in the byte order order, or in the one its
// byte order mark names (which it decodes to U+FEFF, the UTF-8 byte
// order mark the reader then skips), to UTF-8. As the WHATWG standard
// decodes, the mark wins over the label: a file that starts with UTF-8's
// is UTF-8, passed as it is (its dead letters are written in UTF-16,
// which the queue reads the same).
type utf16Reader struct {
	r     io.Reader
	order byteOrder
	in    [4096]byte
	n     int    // bytes of in not decoded yet, from in[0]
	out   []byte // decoded bytes not returned yet
	began bool   // the byte order mark was looked for
	utf8  bool   // the file is UTF-8 (its mark says so): passed as it is
	eof   bool
	err   error
	empty int // reads in a row that returned nothing
}

func newUTF16Reader(r io.Reader, order byteOrder) *utf16Reader {
	return &utf16Reader{r: r, order: order}
}

func (u *utf16Reader) Read(p []byte) (int, error) {
	for len(u.out) == 0 {
		if u.err != nil {
			return 0, u.err
		}
		if u.eof {
			u.decodeLast()
			if len(u.out) == 0 {
				u.err = io.EOF
			}
			continue
		}
		k, err := u.r.Read(u.in[u.n:])
		u.n += k
		switch {
		case err == io.EOF:
			u.eof = true
		case err != nil:
			u.err = err
		case k == 0:
			if u.empty++; u.empty >= 100 {
				u.err = io.ErrNoProgress
			}
			continue
		}
		u.empty = 0
		u.decode()
	}
	n := copy(p, u.out)
	u.out = u.out[n:]
	return n, nil
}

// decode decodes the whole code units and surrogate pairs of in, keeping
// a high surrogate whose pair may still come.
func (u *utf16Reader) decode() {
	b := u.in[:u.n]
	if !u.began {
		if len(b) < 3 && !u.eof {
			return
		}
		u.began = true
		switch {
		case len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF:
			u.utf8 = true
		case len(b) >= 2 && b[0] == 0xFF && b[1] == 0xFE:
			u.order = binary.LittleEndian
		case len(b) >= 2 && b[0] == 0xFE && b[1] == 0xFF:
			u.order = binary.BigEndian
		}
	}
	if u.utf8 {
		u.out, u.n = append(u.out[:0], b...), 0
		return
	}
	out := u.out[:0]
	i := 0
	for ; i+2 <= len(b); i += 2 {
		c := rune(u.order.Uint16(b[i:]))
		if utf16.IsSurrogate(c) && c < 0xDC00 {
			if i+4 > len(b) {
				if !u.eof {
					break // its pair may be in the next read
				}
			} else if c2 := rune(u.order.Uint16(b[i+2:])); c2 >= 0xDC00 && c2 <= 0xDFFF {
				out = utf8.AppendRune(out, utf16.DecodeRune(c, c2))
				i += 2
				continue
			}
		}
		out = appendUnit(out, c)
	}
	u.out = out
	u.n = copy(u.in[:], b[i:])
}

// decodeLast decodes what is left at the end of the stream: a lone last
// byte.
func (u *utf16Reader) decodeLast() {
	u.decode()
	if len(u.out) == 0 && u.n == 1 {
		u.out, u.n = append(u.out[:0], 0xFF), 0
	}
}

// appendUnit appends the UTF-8 of c, a code unit that is no surrogate
// pair: an unpaired surrogate as generalized UTF-8.
func appendUnit(out []byte, c rune) []byte {
	if utf16.IsSurrogate(c) {
		return append(out, 0xE0|byte(c>>12), 0x80|byte(c>>6)&0x3F, 0x80|byte(c)&0x3F)
	}
	return utf8.AppendRune(out, c)
}

// appendUTF16 appends s, UTF-8 as utf16Reader decodes it, in UTF-16 of
// byte order order: what the reader decoded is written back as it was
// read, an unpaired surrogate included.
func appendUTF16(out, s []byte, order byteOrder) []byte {
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		if r == utf8.RuneError && size == 1 {
			if len(s) >= 3 && s[0] == 0xED && s[1] >= 0xA0 && s[1] <= 0xBF && s[2]&0xC0 == 0x80 {
				r, size = rune(s[0]&0x0F)<<12|rune(s[1]&0x3F)<<6|rune(s[2]&0x3F), 3
			} else {
				r = utf8.RuneError
			}
		}
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError || r2 != utf8.RuneError {
			out = order.AppendUint16(order.AppendUint16(out, uint16(r1)), uint16(r2))
		} else {
			out = order.AppendUint16(out, uint16(r))
		}
		s = s[size:]
	}
	return out
}

// utf16Writer writes what is written to it to w in UTF-16 (appendUTF16),
// holding back an incomplete character until the next write.
type utf16Writer struct {
	w     io.Writer
	order byteOrder
	held  []byte
	buf   []byte
}

func (u *utf16Writer) Write(p []byte) (int, error) {
	s := append(u.held, p...)
	// A character cut by the end of p waits for its other bytes.
	cut := len(s)
	for back := 1; back <= utf8.UTFMax-1 && back <= len(s); back++ {
		c := s[len(s)-back]
		if c < 0x80 {
			break
		}
		if c >= 0xC0 { // a lead byte: is its sequence whole?
			need := 2
			switch {
			case c >= 0xF0:
				need = 4
			case c >= 0xE0:
				need = 3
			}
			if back < need {
				cut = len(s) - back
			}
			break
		}
	}
	u.buf = appendUTF16(u.buf[:0], s[:cut], u.order)
	u.held = append(u.held[:0:0], s[cut:]...)
	if _, err := u.w.Write(u.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close writes what is held back.
func (u *utf16Writer) Close() error {
	if len(u.held) == 0 {
		return nil
	}
	u.buf = appendUTF16(u.buf[:0], u.held, u.order)
	u.held = nil
	_, err := u.w.Write(u.buf)
	return err
}

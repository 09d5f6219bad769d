package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/transform"
)

// Records are split in the file's own bytes, then each record alone is
// decoded to UTF-8 (decoder.decode). Splitting first keeps what phase 2
// needs exact: a record's offsets are offsets in the file, so a resume
// seeks to them, and its raw bytes are the file's, so its dead letter is
// written back in the file's encoding and read again by the same queue
// after a replay. Decoding first would give offsets in the decoded text,
// which no longer map onto the file for a multi-byte encoding.
//
// Splitting in raw bytes is exact only where the bytes the splitters look
// for, line feed, carriage return, the double and single quote, < and >,
// are never part of a multi-byte character. That holds for UTF-8, for
// every WHATWG single-byte encoding (ASCII below 0x80), and for the CJK
// encodings, whose lead bytes are 0x81 and up and whose trail bytes are
// 0x40 and up (0x30 to 0x39, digits, for GB18030's four-byte forms): all
// above those bytes (TestStructuralBytesNeverTrail checks every character
// of every encoding). A CSV delimiter or comment character may be a trail
// byte (| is one in Shift_JIS), so fields are split only after decoding,
// and the splitter looks for the delimiter only to know where a quoted
// field may open; ] may be one too, so the XML splitter checks a CDATA
// end by decoding (xmlLexer.cdataEnd). UTF-16, whose every ASCII
// character is two bytes, is decoded to UTF-8 before it is split instead
// (utf16.go). Refused: ISO-2022-JP, whose two-byte characters are made of
// ASCII bytes (quotes and < among them); and the WHATWG "replacement"
// encoding, which decodes any file to one error.

// charset is an encoding the reader can split in the file's bytes.
type charset struct {
	name string            // the WHATWG name
	enc  encoding.Encoding // nil for UTF-8
	// multi is set for the CJK multi-byte encodings, whose trail bytes
	// include ASCII letters and punctuation from 0x40 up.
	multi bool
	// utf16 is the byte order of UTF-16 (utf-16le, utf-16be), nil for
	// the others: the file is decoded to UTF-8 as it is read, and the
	// records are split and decoded as UTF-8 (enc is nil).
	utf16 byteOrder
	// fffd is U+FFFD as the encoding writes it, nil when it cannot: the
	// decoders write U+FFFD for an invalid sequence, so it means an error
	// unless the file can hold the character itself.
	fffd []byte
}

// multiByte are the WHATWG names of the CJK multi-byte encodings.
var multiByte = map[string]bool{"gbk": true, "gb18030": true, "big5": true, "euc-jp": true, "shift_jis": true, "euc-kr": true}

// lookupCharset resolves a WHATWG label; "" is UTF-8.
func lookupCharset(label string) (*charset, error) {
	if label == "" {
		label = "utf-8"
	}
	lookup := label
	if l, ok := codePages[strings.ToLower(strings.TrimSpace(label))]; ok {
		lookup = l
	}
	enc, err := htmlindex.Get(lookup)
	if err != nil {
		return nil, fmt.Errorf("encoding %q is unknown: give a WHATWG label such as utf-8, windows-1252, iso-8859-15, shift_jis, euc-kr or gb18030", label)
	}
	name, err := htmlindex.Name(enc)
	if err != nil {
		return nil, fmt.Errorf("encoding %q: %w", label, err)
	}
	switch name {
	case "utf-8":
		return &charset{name: name, fffd: []byte("\uFFFD")}, nil
	case "utf-16le":
		return &charset{name: name, fffd: []byte("\uFFFD"), utf16: binary.LittleEndian}, nil
	case "utf-16be":
		return &charset{name: name, fffd: []byte("\uFFFD"), utf16: binary.BigEndian}, nil
	case "iso-2022-jp":
		return nil, fmt.Errorf("encoding %q (%s) is not supported: its two-byte characters are made of ASCII bytes, quotes and < among them, so records cannot be split in the file's bytes; use shift_jis, euc-jp or utf-8", label, name)
	case "replacement":
		return nil, fmt.Errorf("encoding %q names the WHATWG replacement encoding, which decodes every file to one error: name the encoding the files are written in", label)
	}
	cs := &charset{name: name, enc: enc, multi: multiByte[name]}
	if b, err := enc.NewEncoder().Bytes([]byte("\uFFFD")); err == nil {
		cs.fffd = b
	}
	return cs, nil
}

// EncodingName returns the WHATWG name of the encoding label names
// ("euc-kr" for "cp949", "windows-949" or "EUC-KR"; "utf-8" for "" and
// "utf8"), or why the queue cannot read files in it: labels of one
// encoding name one format.
func EncodingName(label string) (string, error) {
	cs, err := lookupCharset(label)
	if err != nil {
		return "", err
	}
	return cs.name, nil
}

// codePages maps the names of Windows' code pages and their aliases that
// are no WHATWG labels, but are what a Windows, Python or Java user
// knows the encoding by ("cp949" for Korean exports), to a WHATWG label
// of the same encoding: WHATWG's euc-kr is code page 949, its gbk 936,
// its shift_jis 932 and its big5 950.
var codePages = map[string]string{
	"cp932": "shift_jis", "ms932": "shift_jis",
	"cp936": "gbk", "ms936": "gbk",
	"cp949": "euc-kr", "ms949": "euc-kr", "uhc": "euc-kr",
	"cp950": "big5", "ms950": "big5",
	"cp65001": "utf-8",
}

// encode writes s in the encoding the records are split in, or fails
// when it holds a character the encoding has not (UTF-8 for UTF-16,
// decoded before it is split).
func (cs *charset) encode(s string) ([]byte, error) {
	if cs.enc == nil {
		return []byte(s), nil
	}
	return cs.enc.NewEncoder().Bytes([]byte(s))
}

// decoder decodes records of one charset; not safe for concurrent use.
type decoder struct {
	cs  *charset
	t   transform.Transformer // nil for UTF-8
	buf []byte
}

func (cs *charset) newDecoder() *decoder {
	d := &decoder{cs: cs}
	if cs.enc != nil {
		d.t = cs.enc.NewDecoder()
	}
	return d
}

// invalidSeq is a byte sequence that is not a character of the encoding,
// at byte offset at of the bytes decoded.
type invalidSeq struct {
	at  int
	seq []byte
}

// describe says what is wrong for a RejectError's detail.
func (e *invalidSeq) describe(cs *charset) string {
	if cs.utf16 != nil {
		// The record was decoded already: its bytes are not the file's.
		return fmt.Sprintf("invalid %s: an unpaired surrogate, or a last byte without its pair, at byte %d of the record decoded to UTF-8", cs.name, e.at)
	}
	var b strings.Builder
	for i, c := range e.seq {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "0x%02X", c)
	}
	return fmt.Sprintf("invalid %s byte sequence %s at byte %d", cs.name, b.String(), e.at)
}

// decode returns raw as UTF-8, or the first sequence that is invalid in
// the encoding. The result is raw itself when raw is ASCII (the same in
// every encoding spool reads) or valid UTF-8 of a UTF-8 file, and
// otherwise d's buffer, valid until the next call.
func (d *decoder) decode(raw []byte) ([]byte, *invalidSeq) {
	if d.t == nil {
		if utf8.Valid(raw) {
			return raw, nil
		}
		return nil, firstInvalidUTF8(raw)
	}
	if isASCII(raw) {
		return raw, nil
	}
	// 3 bytes out for 1 in is the most any of them writes: a single
	// byte, or a Shift_JIS half-width katakana, to a 3-byte character.
	if need := 3*len(raw) + utf8.UTFMax; cap(d.buf) < need {
		d.buf = make([]byte, need)
	}
	d.buf = d.buf[:cap(d.buf)]
	for {
		d.t.Reset()
		n, _, err := d.t.Transform(d.buf, raw, true)
		if errors.Is(err, transform.ErrShortDst) {
			d.buf = make([]byte, 2*len(d.buf))
			continue
		}
		out := d.buf[:n]
		if err != nil || bytes.Contains(out, []byte("\uFFFD")) {
			// Rare: find the sequence that was replaced, unless every
			// U+FFFD was written in the file as itself.
			if bad := d.firstInvalid(raw); bad != nil || err != nil {
				if bad == nil {
					bad = &invalidSeq{at: 0, seq: raw[:min(len(raw), 1)]}
				}
				return nil, bad
			}
		}
		return out, nil
	}
}

// firstInvalid steps through raw one character at a time, giving the
// decoder room for exactly one character per call, and returns the first
// sequence it replaced with U+FFFD that is not the encoding's own U+FFFD.
func (d *decoder) firstInvalid(raw []byte) *invalidSeq {
	var dst [2 * utf8.UTFMax]byte
	for i := 0; i < len(raw); {
		var nDst, nSrc int
		for size := 1; size <= len(dst) && nDst == 0; size++ {
			d.t.Reset()
			nDst, nSrc, _ = d.t.Transform(dst[:size], raw[i:], true)
		}
		if nSrc == 0 {
			return &invalidSeq{at: i, seq: raw[i : i+1]}
		}
		if r, _ := utf8.DecodeRune(dst[:nDst]); r == utf8.RuneError && !bytes.Equal(raw[i:i+nSrc], d.cs.fffd) {
			return &invalidSeq{at: i, seq: raw[i : i+nSrc]}
		}
		i += nSrc
	}
	return nil
}

// firstInvalidUTF8 finds the first invalid sequence of UTF-8 in b.
func firstInvalidUTF8(b []byte) *invalidSeq {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return &invalidSeq{at: i, seq: b[i : i+1]}
		}
		i += size
	}
	return nil
}

// isASCII reports whether b holds only bytes below 0x80.
func isASCII(b []byte) bool {
	for len(b) >= 8 {
		if (uint64(b[0])|uint64(b[1])<<8|uint64(b[2])<<16|uint64(b[3])<<24|
			uint64(b[4])<<32|uint64(b[5])<<40|uint64(b[6])<<48|uint64(b[7])<<56)&0x8080808080808080 != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

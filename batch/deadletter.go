package batch

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DeadLetter is what stands in error/ for a failed record: a file of the
// batch file's own format and encoding that holds that record alone, so
// that an operator fixes it in an editor and `spool replay` puts it back
// in inbox/, where the same queue reads it as it read the batch.
type DeadLetter struct {
	// Name is the file's name in error/: the batch file's, with ".gz"
	// dropped and "~L" and the record's line (JSON Lines, CSV) or "~E"
	// and its element number (XML) before the extension:
	// orders.csv.gz's line 17 is orders~L17.csv. It is Format.Include'd
	// when the batch file was (Check makes sure for gzip) and needs no
	// done-file (Match).
	Name string
	// Whole says the dead letter is the batch file itself, moved to
	// error/ under its own name as spool has always moved a bad file:
	// the file cannot be read at all (Record.Whole), or it is of the
	// JSON format, whose one record is the file.
	Whole bool
	// Content is the file's bytes: the CSV header's line (with the
	// byte order mark the file had) then the record's, the XML
	// declaration then the record's element (with the namespace
	// declarations of the elements around it that it uses: xmlns.go),
	// the JSON Lines line. It is
	// uncompressed, and in the file's encoding. Nil when Whole, or when
	// the record is over the limit: the content is then Prefix followed
	// by the stream's bytes Start to End, for CopyRange to copy.
	Content    []byte
	Prefix     []byte
	Start, End int64
}

// DeadLetter returns the dead letter of rec, a failure this reader read.
func (r *Reader) DeadLetter(rec Record) DeadLetter {
	if rec.Whole || r.kind == JSON {
		return DeadLetter{Name: r.name, Whole: true}
	}
	d := DeadLetter{Name: deadLetterName(r.name, rec), Prefix: r.prefix, Start: rec.Start, End: rec.End}
	if raw := rec.Raw; raw != nil {
		if r.kind == XML && !rec.Tail {
			raw = withScope(raw, rec.scope)
		}
		d.Content = append(append(make([]byte, 0, len(r.prefix)+len(raw)), r.prefix...), raw...)
	}
	if o := r.cs.utf16; o != nil {
		// Decoded as read: written back in the queue's UTF-16, with
		// the byte order mark the file had.
		d.Prefix = appendUTF16(nil, d.Prefix, o)
		if d.Content != nil {
			d.Content = appendUTF16(nil, d.Content, o)
		}
	}
	return d
}

// deadLetterName names the dead letter of rec, of the file named file.
func deadLetterName(file string, rec Record) string {
	name := file
	if s, ok := strings.CutSuffix(file, ".gz"); ok && s != "" {
		name = s
	}
	mark := "~L" + strconv.FormatInt(rec.Line, 10)
	if rec.Element > 0 {
		mark = "~E" + strconv.FormatInt(rec.Element, 10)
	}
	stem, ext := name, ""
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		stem, ext = name[:i], name[i:]
	}
	const maxName = 255 // NAME_MAX
	for len(stem)+len(mark)+len(ext) > maxName && stem != "" {
		_, size := utf8.DecodeLastRuneInString(stem)
		stem = stem[:len(stem)-size]
	}
	return stem + mark + ext
}

// IsDeadLetterName reports whether name is shaped as DeadLetter names a
// record's dead letter (orders~L17.csv): such a file, put back by a
// replay, needs no done-file (Match).
func IsDeadLetterName(name string) bool { return isDeadLetterName(name) }

// DeadLetterSources returns the names of the batch file whose record a
// file of error/ named name may be the dead letter of, the inverse of the
// naming above ("orders~L17.csv", or "orders~L17~2.csv" with a collision
// suffix, of orders.csv or orders.csv.gz), or nil when name has no such
// shape. A name shortened to fit NAME_MAX gives the shortened stem.
func DeadLetterSources(name string) []string {
	stem, ext := name, ""
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		stem, ext = name[:i], name[i:]
	}
	if i := strings.LastIndexByte(stem, '~'); i > 0 && !isDeadLetterName(stem+ext) && strings.Trim(stem[i+1:], "0123456789") == "" {
		stem = stem[:i] // a collision suffix
	}
	if !isDeadLetterName(stem + ext) {
		return nil
	}
	data := stem[:strings.LastIndexByte(stem, '~')] + ext
	return []string{data, data + ".gz"}
}

// isDeadLetterName reports whether name has the shape deadLetterName
// gives: a stem, "~L" or "~E", a number from 1 without leading zeros,
// then the extension if any.
func isDeadLetterName(name string) bool {
	stem := name
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		stem = name[:i]
	}
	i := strings.LastIndex(stem, "~")
	if i <= 0 || i+2 >= len(stem) || stem[i+1] != 'L' && stem[i+1] != 'E' || stem[i+2] == '0' {
		return false
	}
	for _, c := range stem[i+2:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Prefix is what a one-record dead letter of this file starts with: the
// CSV header line, or the XML declaration; nil for JSON Lines. It is
// known once the first record has been read.
func (r *Reader) Prefix() []byte { return r.prefix }

// CopyRange copies the bytes start to end of the stream of the file named
// name, which src reads from its start (gunzipped when name ends in
// ".gz", decoded from UTF-16 when the format's encoding is, as Open reads
// it), to w, in the file's encoding: the content of a record over the
// limit, which the Reader did not hold, for its dead letter. Memory is
// bounded.
func (f Format) CopyRange(w io.Writer, src io.Reader, name string, start, end int64) error {
	cs, err := lookupCharset(f.Encoding)
	if err != nil {
		return fmt.Errorf("copy %s: %w", name, err)
	}
	r := src
	if strings.HasSuffix(name, ".gz") {
		zr, err := gzip.NewReader(src)
		if err != nil {
			return fmt.Errorf("copy %s: %w", name, err)
		}
		r = zr
	}
	var uw *utf16Writer
	if cs.utf16 != nil {
		r = newUTF16Reader(r, cs.utf16)
		uw = &utf16Writer{w: w, order: cs.utf16}
		w = uw
	}
	if _, err := io.CopyN(io.Discard, r, start); err != nil {
		return fmt.Errorf("copy %s from %d: %w", name, start, err)
	}
	if _, err := io.CopyN(w, r, end-start); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("copy %s to %d: %w", name, end, err)
	}
	if uw != nil {
		if err := uw.Close(); err != nil {
			return fmt.Errorf("copy %s: %w", name, err)
		}
	}
	return nil
}

// Key returns the idempotency key Format.HashKey gives the record whose
// JSON object is obj: the SHA-256, in lower-case hex, of obj's canonical
// form, which drops white space, sorts each object's members by name,
// writes every string in one escaping and keeps numbers as written. So
// the same fields make the same key whatever their order, spacing or
// escapes, and whatever the format: a CSV row, a JSON Lines line of the
// same strings and an XML element of the same attributes give one key.
// 1.0 and 1 differ, as "1" and 1 do.
//
// The key is the record's content, so two records that are equal are one
// message, the second a duplicate: right for a feed that resends whole
// files, wrong for one where two equal rows are two events (two sales of
// one item at one price with no order number or time), which must carry
// a key field of their own instead.
func Key(obj []byte) (string, error) {
	c, err := canonicalJSON(obj)
	if err != nil {
		return "", fmt.Errorf("key: %w", err)
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// Key is the record's hashed key (Key of its JSON); it fails for a
// failed record, which has no JSON.
func (rec Record) Key() (string, error) {
	if rec.Err != nil {
		return "", fmt.Errorf("key of %s: %w", rec.Origin(), rec.Err)
	}
	return Key(rec.JSON)
}

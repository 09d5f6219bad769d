package spool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Parse checks one message's bytes against the contract and returns the
// valid Message, or a *RejectError saying why the message is poison: the
// consumer dead-letters it at once instead of retrying it (docs/DESIGN.md,
// "The message contract"). Every error for a bad message is a *RejectError; the only
// other error is one wrapping ErrBadContract, for a contract without a key
// field, because that is the operator's mistake, not the message's, and must
// stop the run rather than dead-letter the whole queue.
//
// The rules, in the order they are applied, each reason beating the next:
//
//   - ReasonParse: an empty file; anything but exactly one JSON object
//     (RFC 8259, strictly); invalid UTF-8 anywhere, including inside strings;
//     trailing data or a second object; nesting deeper than MaxDepth. A
//     leading UTF-8 byte order mark is a parse error too: RFC 8259 forbids
//     senders to add one, and accepting it would make two byte-different
//     files of one message look alike only to some tools.
//   - ReasonInvalidField "duplicate key": a key that repeats within any one
//     object, compared after decoding ("a" and "\u0061" are the same key),
//     because which of the two values counts differs between JSON tools.
//   - ReasonMissingField: the key field (always required), then each of
//     c.Required in order, absent or null.
//   - ReasonInvalidField: a role field that is present and not null but has
//     the wrong type or range, checked whether or not it is required: the
//     keys (key and order fields) at most MaxKeyLen bytes, without U+0000
//     or a lone surrogate escape, the amount at most MaxAmountLen bytes;
//     then the header fields (HeaderFields): version and tenant strings of
//     1 to MaxHeaderLen bytes without control characters or a lone
//     surrogate escape, the trace a W3C traceparent (ParseTraceparent).
//
// A lone surrogate escape ("\ud800" with no low surrogate after it) is
// valid JSON but names no character: it decodes to U+FFFD, as in
// encoding/json, so two keys that differ only in one would be one key,
// and Parse refuses it in every field it reads as a key or label. Other
// fields may hold one: they are stored as the raw bytes that were sent,
// never decoded, so nothing is merged.
//
// Parse keeps numbers as the text that was sent, so Amount and integer keys
// never pass through float64. It does not trust the caller to have bounded
// the input: time and memory stay linear in len(data) and the stack is
// bounded by MaxDepth. The returned Message shares data (Message.Raw and
// each Field.Raw are sub-slices of it), so data must not be modified while
// the Message is in use.
func (c Contract) Parse(data []byte) (*Message, error) {
	if c.KeyField == "" {
		return nil, fmt.Errorf("%w: key field is empty", ErrBadContract)
	}
	s := getScanner(data)
	defer putScanner(s)

	s.skipWS()
	if s.pos == len(data) {
		return nil, reject(ReasonParse, "", "empty message")
	}
	s.pos = 0
	kind, ok := s.scan()
	if !ok {
		return nil, reject(ReasonParse, "", "%s", s.err)
	}
	if kind == KindArray {
		// An export of many messages as one array: a format spool does
		// not read (it streams JSON Lines instead).
		return nil, reject(ReasonParse, "", "not a JSON object, found array (a message is one object; for a file of many, write JSON Lines, an object a line, to a queue of format jsonl)")
	}
	if kind != KindObject {
		return nil, reject(ReasonParse, "", "not a JSON object, found %s", kindNoun(kind))
	}
	if s.dup {
		return nil, duplicate(s.dupKey)
	}

	// Presence: key field first, then the required list in order.
	if err := s.present(c.KeyField); err != nil {
		return nil, err
	}
	for _, name := range c.Required {
		if err := s.present(name); err != nil {
			return nil, err
		}
	}

	// Types of the role fields. Their decoded values are appended to s.keys
	// after the top-level names, so that one string conversion at the end
	// gives every string of the Message: a valid message costs three
	// allocations (the Message, its Fields and that string).
	var key, order, amount span
	var seq int64
	var err *RejectError
	if key, err = s.identifier(c.KeyField); err != nil {
		return nil, err
	}
	if c.OrderField != "" {
		if order, err = s.identifier(c.OrderField); err != nil {
			return nil, err
		}
	}
	if c.SeqField != "" {
		if seq, err = s.sequence(c.SeqField); err != nil {
			return nil, err
		}
	}
	if c.AmountField != "" {
		if amount, err = s.amount(c.AmountField); err != nil {
			return nil, err
		}
	}

	hs, err := s.headers(c.Headers)
	if err != nil {
		return nil, err
	}

	text := string(s.keys)
	fields := make([]Field, len(s.members))
	for i, m := range s.members {
		fields[i] = Field{
			Name: text[m.keyStart:m.keyEnd],
			Kind: m.kind,
			Raw:  data[m.valStart:m.valEnd:m.valEnd],
		}
	}
	return &Message{
		MsgID:   text[key.start:key.end],
		OrderNo: text[order.start:order.end],
		Seq:     seq,
		Amount:  Amount(text[amount.start:amount.end]),
		Headers: MessageHeaders{
			Version: text[hs.version.start:hs.version.end],
			Trace:   text[hs.trace.start:hs.trace.end],
			Tenant:  text[hs.tenant.start:hs.tenant.end],
		},
		Fields: fields,
		Raw:    data,
	}, nil
}

// span locates a decoded value in scanner.keys; the zero span is "".
type span struct{ start, end int }

// field returns the top-level member with the given name. Keys are unique
// by now (duplicates were rejected), so the first match is the only one.
func (s *scanner) field(name string) (member, bool) {
	for _, m := range s.members {
		if string(s.keys[m.keyStart:m.keyEnd]) == name {
			return m, true
		}
	}
	return member{}, false
}

// present rejects a required field that is absent or null: null counts as
// missing (docs/DESIGN.md, "The message contract"), because a producer that sends "msg_id": null has not sent
// a key.
func (s *scanner) present(name string) *RejectError {
	m, ok := s.field(name)
	switch {
	case !ok:
		return reject(ReasonMissingField, name, "required field is missing%s", s.missingHint(name))
	case m.kind == KindNull:
		return reject(ReasonMissingField, name, "required field is null")
	}
	return nil
}

// maxNestedLook bounds how many of a message's top-level objects
// missingHint looks into for the missing field.
const maxNestedLook = 8

// missingHint says where a required field that is not among the
// message's top-level members most likely is, for its dead letter's
// detail: under another spelling of its name, in another case or with
// other separators (MsgID, msgId, msg-id: a producer's convention, or the
// contract's name, spool.conf, to change), or inside an object (an envelope such as {"data": {...}}),
// where the contract never looks; "" when neither. It runs on the dead
// letter's path alone.
func (s *scanner) missingHint(name string) string {
	fold := func(k string) string {
		return strings.Map(func(r rune) rune {
			if r == '_' || r == '-' || r == '.' || r == ' ' {
				return -1
			}
			return unicode.ToLower(r)
		}, k)
	}
	want := fold(name)
	for _, m := range s.members {
		k := string(s.keys[m.keyStart:m.keyEnd])
		if fold(k) == want {
			return fmt.Sprintf(" (the message has %q: the contract names the field %q)", clipTo([]byte(k), maxShown), clipTo([]byte(name), maxShown))
		}
	}
	looked := 0
	for _, m := range s.members {
		if m.kind != KindObject || looked == maxNestedLook {
			continue
		}
		looked++
		var inner map[string]json.RawMessage
		if json.Unmarshal(s.data[m.valStart:m.valEnd], &inner) != nil {
			continue
		}
		if _, ok := inner[name]; ok {
			return fmt.Sprintf(" (it is inside %q: the contract reads the top-level fields)", clipTo([]byte(s.keys[m.keyStart:m.keyEnd]), maxShown))
		}
	}
	return ""
}

// identifier checks a key-like field (the idempotency key or the order
// key): a string with something besides whitespace, or an integer kept as
// the exact text that was sent, of at most MaxKeyLen bytes either way. An
// absent or null field gives the zero span.
func (s *scanner) identifier(name string) (span, *RejectError) {
	m, ok := s.field(name)
	if !ok || m.kind == KindNull {
		return span{}, nil
	}
	const rule = "must be a non-empty string or an integer"
	start := len(s.keys)
	switch m.kind {
	case KindInteger:
		s.keys = append(s.keys, s.data[m.valStart:m.valEnd]...)
	case KindString:
		s.decodeString(m)
		v := s.keys[start:]
		switch {
		case len(v) == 0:
			return span{}, reject(ReasonInvalidField, name, "%s, found an empty string", rule)
		case onlySpace(v):
			return span{}, reject(ReasonInvalidField, name, "%s, found a string of only whitespace", rule)
		case bytes.IndexByte(v, 0) >= 0:
			// PostgreSQL text cannot hold U+0000: storing this key would
			// fail the ledger batch on every attempt, so it is poison now.
			return span{}, reject(ReasonInvalidField, name, "must not contain U+0000 (NUL)")
		case s.lone >= 0:
			return span{}, s.loneSurrogate(name)
		}
	default:
		return span{}, reject(ReasonInvalidField, name, "%s, found %s", rule, s.describe(m))
	}
	if n := len(s.keys) - start; n > MaxKeyLen {
		// A key is an index key in every ledger (MaxKeyLen): a longer one
		// would fail its whole batch on PostgreSQL, on every attempt.
		return span{}, reject(ReasonInvalidField, name, "must be at most %d bytes, found %d bytes", MaxKeyLen, n)
	}
	return span{start, len(s.keys)}, nil
}

// loneSurrogate is the rejection of field name, whose string decodeString
// just decoded, for the lone surrogate escape at s.lone.
func (s *scanner) loneSurrogate(name string) *RejectError {
	return reject(ReasonInvalidField, name, "must not contain a lone surrogate escape (no character, decoded as U+FFFD), found %s at offset %d",
		s.data[s.lone:s.lone+6], s.lone)
}

// duplicate is the rejection of a message with key twice in one object. A
// name longer than MaxKeyLen is cut short in the record (the field of a
// dead letter is a label, and the message itself is kept in error/).
func duplicate(key string) *RejectError {
	if len(key) <= MaxKeyLen {
		return reject(ReasonInvalidField, key, "duplicate key")
	}
	return reject(ReasonInvalidField, clipTo([]byte(key), MaxKeyLen), "duplicate key (a name of %d bytes, cut short here)", len(key))
}

// sequence checks the sequence field: an integer from 1 to MaxInt64,
// written as an integer (1.0 and 1e0 are not: a producer that sends them is
// not sending what the contract says, and guessing would hide it).
func (s *scanner) sequence(name string) (int64, *RejectError) {
	m, ok := s.field(name)
	if !ok || m.kind == KindNull {
		return 0, nil
	}
	const rule = "must be an integer >= 1"
	if m.kind != KindInteger {
		hint := ""
		switch m.kind {
		case KindNumber:
			hint = seqHint(string(s.data[m.valStart:m.valEnd]), false)
		case KindString:
			start := len(s.keys)
			s.decodeString(m)
			hint = seqHint(string(s.keys[start:]), true)
			s.keys = s.keys[:start]
		}
		return 0, reject(ReasonInvalidField, name, "%s, found %s%s", rule, s.describe(m), hint)
	}
	text := s.data[m.valStart:m.valEnd]
	if text[0] == '-' || (len(text) == 1 && text[0] == '0') {
		return 0, reject(ReasonInvalidField, name, "%s, found %s", rule, clip(text))
	}
	var n int64
	for _, d := range text {
		v := int64(d - '0')
		if n > (1<<63-1-v)/10 {
			return 0, reject(ReasonInvalidField, name, "%s that fits in 64 bits, found %s", rule, clip(text))
		}
		n = n*10 + v
	}
	return n, nil
}

// seqHint says what most likely keeps v, a sequence's number or string
// (quoted) that is no integer, from being one, for its dead letter's
// detail: a whole number written with a zero fraction (1.0, as a float
// column of a spreadsheet or a data frame exports it), quotes around an
// integer, white space around it, leading zeros, digit grouping; "" when
// none of these. spool does not read it as the integer it looks like:
// the producer writes one.
func seqHint(v string, quoted bool) string {
	t := strings.TrimFunc(v, unicode.IsSpace)
	whole := func(d string) bool { return d != "" && strings.Trim(d, "0123456789") == "" }
	plain := strings.TrimLeft(t, "0")
	switch {
	case t == "":
		return ""
	case len(t) < len(v) && whole(t):
		return " (white space around the number)"
	case whole(t) && plain != t && plain != "":
		return " (leading zeros: write " + clip([]byte(plain)) + ")"
	case whole(t) && quoted && plain != "":
		return " (a number in quotes: write it as an integer, " + clip([]byte(t)) + ")"
	}
	if i := strings.IndexByte(t, '.'); i > 0 && whole(t[:i]) && strings.Trim(t[i+1:], "0") == "" && t[:i] != strings.Repeat("0", i) {
		return " (a whole number written with a fraction, as a float column exports it: write " + clip([]byte(strings.TrimLeft(t[:i], "0"))) + ")"
	}
	if g := strings.NewReplacer(",", "", "'", "", " ", "", "\u00a0", "", "\u202f", "").Replace(t); g != t && whole(g) {
		return " (digit grouping: write " + clip([]byte(strings.TrimLeft(g, "0"))) + ")"
	}
	return ""
}

// amount checks the money field: a JSON number, or a string holding exactly
// one JSON number, kept as the text that was sent so that nothing is ever
// rounded (docs/DESIGN.md, "The message contract": money is exact).
func (s *scanner) amount(name string) (span, *RejectError) {
	m, ok := s.field(name)
	if !ok || m.kind == KindNull {
		return span{}, nil
	}
	const rule = "must be a JSON number or a string in JSON number syntax"
	start := len(s.keys)
	switch m.kind {
	case KindInteger, KindNumber:
		s.keys = append(s.keys, s.data[m.valStart:m.valEnd]...)
	case KindString:
		s.decodeString(m)
		if !isJSONNumber(s.keys[start:]) {
			return span{}, reject(ReasonInvalidField, name, "%s, found %s%s", rule, s.describe(m), numberHint(s.keys[start:]))
		}
	default:
		return span{}, reject(ReasonInvalidField, name, "%s, found %s", rule, s.describe(m))
	}
	if n := len(s.keys) - start; n > MaxAmountLen {
		return span{}, reject(ReasonInvalidField, name, "must be at most %d bytes, found %d bytes", MaxAmountLen, n)
	}
	return span{start, len(s.keys)}, nil
}

// numberHint says what most likely keeps text, an amount's string that
// is no JSON number, from being one, for its dead letter's detail: white
// space around the number, a currency sign or code beside it ($5,
// 5.00 EUR), a decimal comma or digit grouping (5,00, 1.234,56, 1 234.50,
// 1'234.50: a spreadsheet's export in another locale); "" when none of
// these. The amount is kept exactly as written, so spool never guesses
// which of a comma and a point is the decimal mark: the producer writes
// JSON number syntax.
func numberHint(text []byte) string {
	t := bytes.TrimFunc(text, unicode.IsSpace)
	if len(t) == 0 {
		return ""
	}
	if len(t) < len(text) && isJSONNumber(t) {
		return " (white space around the number)"
	}
	core := bytes.TrimFunc(t, func(r rune) bool { return unicode.IsLetter(r) || unicode.Is(unicode.Sc, r) || unicode.IsSpace(r) })
	if len(core) < len(t) && len(core) > 0 && isJSONNumber(core) {
		return fmt.Sprintf(" (a currency sign or code beside the number: write %s alone)", clip(core))
	}
	// A comma, a grouping space or apostrophe, or points more than one:
	// "1." alone is a number cut short, not another locale's.
	digits, points, others := 0, 0, 0
	for i, r := range string(core) {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case r == '-' && i == 0:
		case r == '.':
			points++
		case r == ',' || r == '\'' || r == ' ' || r == '\u00a0' || r == '\u202f':
			others++
		default:
			return ""
		}
	}
	if digits > 0 && (others > 0 || points > 1) {
		return " (a decimal comma or digit grouping: write the number in JSON syntax, with a decimal point and no grouping, as 1234.56)"
	}
	return ""
}

// decodeString appends the decoded content of the string member m to
// s.keys, and leaves in s.lone the offset of its first lone surrogate
// escape, -1 when it has none. The scan already validated it, so it
// cannot fail.
func (s *scanner) decodeString(m member) {
	s.pos, s.lone = m.valStart, -1
	s.str(&s.keys)
}

// describe names a rejected value for a detail: its kind, and its text
// when that is short enough to be useful on one line.
func (s *scanner) describe(m member) string {
	switch m.kind {
	case KindObject, KindArray:
		return kindNoun(m.kind)
	case KindString:
		if m.valEnd-m.valStart == 2 {
			return "an empty string"
		}
		return "string " + clip(s.data[m.valStart:m.valEnd])
	}
	return kindNoun(m.kind) + " " + clip(s.data[m.valStart:m.valEnd])
}

// maxShown is how much of a bad value a detail quotes.
const maxShown = 40

// clip returns the raw JSON text of a scalar for a detail, cut to maxShown
// bytes at a rune boundary. It stays on one line: a scalar's JSON text
// holds no raw line break (strings carry them only escaped).
func clip(raw []byte) string { return clipTo(raw, maxShown) }

// clipTo is clip to n bytes.
func clipTo(raw []byte, n int) string {
	if len(raw) <= n {
		return string(raw)
	}
	for n > 0 && !utf8.RuneStart(raw[n]) {
		n--
	}
	return string(raw[:n]) + "..."
}

// kindNoun names a kind for a human: both kinds of number are "number".
func kindNoun(k Kind) string {
	if k == KindInteger {
		return "number"
	}
	return string(k)
}

// onlySpace reports whether the valid UTF-8 b holds only Unicode white
// space (the set strings.TrimSpace removes).
func onlySpace(b []byte) bool {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if !unicode.IsSpace(r) {
			return false
		}
		b = b[size:]
	}
	return true
}

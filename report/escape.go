package report

import (
	"encoding/base64"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Terminal returns s fit to reach a terminal: as it is when it is valid
// UTF-8 of printable characters (spaces included) not starting with a
// double quote, else Go-quoted ("\x1b]0;title\a.json"), a form
// strconv.Unquote reverses. A name a producer chose (a file name, a
// msg_id, a field name, a failure's detail quoting one) may hold escape
// sequences that retitle or clear the terminal, or bytes that are no
// UTF-8; every text and CSV report prints such names through Terminal, and
// --json carries them exactly (see B64).
func Terminal(s string) string {
	if !utf8.ValidString(s) || strings.HasPrefix(s, `"`) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if r != ' ' && !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// B64 is the standard base64 of s when s is not valid UTF-8, which JSON
// cannot carry (encoding/json replaces each bad byte with U+FFFD), and nil
// otherwise: the reports' JSON gives a name that is not UTF-8 beside its
// lossy form as NAME_b64, from which the exact bytes come back.
func B64(s string) *string {
	if utf8.ValidString(s) {
		return nil
	}
	b := base64.StdEncoding.EncodeToString([]byte(s))
	return &b
}

// terminalAll applies Terminal to every string of rec.
func terminalAll(rec []string) []string {
	for i, s := range rec {
		rec[i] = Terminal(s)
	}
	return rec
}

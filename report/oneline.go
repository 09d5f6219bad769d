package report

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// OneLine keeps a message on one line, its line breaks as spaces and its
// ends trimmed: scripts and log collectors read stderr (and an audit
// row's detail) a line at a time.
// Any other control character (an escape sequence in a file name a
// producer chose) and any byte that is not UTF-8 is written \xNN, so that
// no message can drive the terminal that shows it.
func OneLine(s string) string {
	s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
	return strings.TrimSpace(escapeControls(s))
}

// escapeControls writes the C0 and C1 control characters, DEL and the
// bytes that are not UTF-8 of s as \xNN (a C1 rune as its code point
// \u00NN), leaving everything else, tabs included, as it is.
func escapeControls(s string) string {
	clean := true
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || (r < 0x20 && r != '\t') || (r >= 0x7f && r < 0xa0) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case (r < 0x20 && r != '\t') || r == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", r)
		case r >= 0x80 && r < 0xa0:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

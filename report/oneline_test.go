package report

import "testing"

// TestOneLine: line breaks become spaces, the ends are trimmed, and the
// control characters and bytes that are not UTF-8 are escaped.
func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"a\nb\r\nc\rd\n":           "a b c d",
		"tab\tkept":                "tab\tkept",
		"esc \x1b]0;t\a":           `esc \x1b]0;t\x07`,
		"bad \xff byte, c1 \u0085": `bad \xff byte, c1 \u0085`,
	} {
		if got := OneLine(in); got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

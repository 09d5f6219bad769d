package cmdline

import "testing"

func TestWrap(t *testing.T) {
	for _, tt := range []struct {
		in    string
		width int
		want  string
	}{
		{"", 10, ""},
		{"one", 10, "one"},
		{"one two three", 7, "one two\nthree"},
		{"one  two\nthree", 20, "one two three"},
		{"a verylongword b", 4, "a\nverylongword\nb"},
		{"ab cd", 5, "ab cd"},
	} {
		if got := Wrap(tt.in, tt.width); got != tt.want {
			t.Errorf("Wrap(%q, %d) = %q, want %q", tt.in, tt.width, got, tt.want)
		}
	}
}

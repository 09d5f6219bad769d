package report

import "testing"

// TestUnsuffixed: the collision suffix comes off whatever the extension,
// as queue puts it on; a "~" that is not a collision's stays.
func TestUnsuffixed(t *testing.T) {
	for in, want := range map[string]string{
		"a~2.json":         "a.json",
		"a.json":           "a.json",
		"orders~L17~2.csv": "orders~L17.csv",
		"orders~L17.csv":   "orders~L17.csv",
		"feed~E5~12.xml":   "feed~E5.xml",
		"noext~3":          "noext",
		"a~.json":          "a~.json",
		"~2.json":          "~2.json",
		"a~2b.json":        "a~2b.json",
	} {
		if got := unsuffixed(in); got != want {
			t.Errorf("unsuffixed(%q) = %q, want %q", in, got, want)
		}
	}
}

package batch

import (
	"slices"
	"testing"
)

// TestDeadLetterSources: the batch file a record's dead letter came from, by
// its name (batch.DeadLetterName), a collision suffix aside; nothing for
// the other names of error/.
func TestDeadLetterSources(t *testing.T) {
	for name, want := range map[string][]string{
		"orders~L17.csv":    {"orders.csv", "orders.csv.gz"},
		"orders~L17~2.csv":  {"orders.csv", "orders.csv.gz"},
		"feed~E3.xml":       {"feed.xml", "feed.xml.gz"},
		"a~b~L1.jsonl":      {"a~b.jsonl", "a~b.jsonl.gz"},
		"noext~L5":          {"noext", "noext.gz"},
		"orders.csv":        nil,
		"m-1.json":          nil,
		"orders~2.csv":      nil,
		"orders~L0.csv":     nil,
		"orders~L017.csv":   nil,
		"orders~Lx.csv":     nil,
		"~L3.csv":           nil,
		"orders~L17~x.csv":  nil,
		"orders~L17~2~3.cs": nil,
	} {
		if got := DeadLetterSources(name); !slices.Equal(got, want) {
			t.Errorf("DeadLetterSources(%q) = %q, want %q", name, got, want)
		}
	}
}

package main

import (
	"io/fs"
	"strings"
	"testing"
)

// TestEveryCommandHasHelp keeps help/ and the commands in step: each
// command has a description that says something, and each file in help/
// is a command's, so a renamed command cannot lose its help silently nor
// leave a stale file behind.
func TestEveryCommandHasHelp(t *testing.T) {
	names := map[string]bool{}
	for _, c := range commands {
		names[c.Name] = true
		h := help(c.Name)
		if strings.TrimSpace(h) == "" {
			t.Errorf("%s: no help/%s.txt", c.Name, c.Name)
		}
		if !strings.HasPrefix(h, "\n") || strings.HasPrefix(h, "\n\n") || strings.HasSuffix(h, "\n") {
			t.Errorf("%s: help/%s.txt should start with its first line and end with one newline", c.Name, c.Name)
		}
	}
	files, err := fs.Glob(helpText, "help/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "help/"), ".txt")
		if !names[name] {
			t.Errorf("%s is no command's help", f)
		}
	}
}

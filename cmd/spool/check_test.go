package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// status still prints over a spool.conf consume refuses, and warns of it.
func TestStatusWarnsOfBadConfig(t *testing.T) {
	q := newQueue(t)
	write(t, filepath.Join(q, "spool.conf"), `{"order_feild": "account"}`)
	r := cli(t, "status", q)
	if r.code != 0 || !strings.Contains(r.stdout, "inbox") || strings.Count(r.stderr, "\n") != 1 ||
		!strings.Contains(r.stderr, `unknown key "order_feild": did you mean "order_field"?`) || !strings.Contains(r.stderr, "Try: spool check "+q) {
		t.Errorf("status over a bad spool.conf: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
}

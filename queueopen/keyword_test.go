package queueopen

import "testing"

func TestIsKeywordDSN(t *testing.T) {
	for db, want := range map[string]bool{
		"host=127.0.0.1 port=5432 dbname=test": true,
		"dbname=spool":                         true,
		"ledger.db":                            false,
		"/var/lib/spool/host.db":               false,
		"my host=notes.db":                     true,
		"":                                     false,
	} {
		if got := isKeywordDSN(db); got != want {
			t.Errorf("isKeywordDSN(%q) = %v, want %v", db, got, want)
		}
	}
}

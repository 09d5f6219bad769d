//go:build linux

package e2e

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestShowRejectedByMsgID: a message dead-lettered for a missing field, or
// for another field invalid, whose msg_id is valid, is found by spool show
// under that msg_id, and --on-dead-letter has it as SPOOL_MSG_ID; one
// whose msg_id is itself invalid has none.
func TestShowRejectedByMsgID(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	notes := filepath.Join(state, "notes")
	putMessage(t, q, "nofield.json", `{"msg_id":"a2","seq":1,"amount":"1.00"}`)
	putMessage(t, q, "badseq.json", `{"msg_id":"a3","order_no":"o","seq":"x","amount":"1.00"}`)
	putMessage(t, q, "badkey.json", `{"msg_id":{"k":1},"seq":1,"amount":"1.00"}`)
	r := mustRun(t, 0, "consume", q, "--log-level", "warn",
		"--on-dead-letter", `printf '%s|%s\n' "$SPOOL_FILE" "$SPOOL_MSG_ID" >> `+shellQuote(notes))
	requireStats(t, "dead letters", r, consumeStats{DeadLetters: 3})
	got := readLines(t, notes)
	slices.Sort(got)
	if want := []string{"badkey.json|", "badseq.json|a3", "nofield.json|a2"}; !slices.Equal(got, want) {
		t.Errorf("SPOOL_FILE|SPOOL_MSG_ID: %q, want %q", got, want)
	}
	for id, want := range map[string]string{"a2": "missing-field (order_no)", "a3": "invalid-field (seq)"} {
		s := mustRun(t, 0, "show", q, id).stdout
		if !strings.Contains(s, "msg_id       "+id) || !strings.Contains(s, want) {
			t.Errorf("show %s:\n%s\nwant its dead letter, %s", id, s, want)
		}
	}
	if n := queryLedger(t, filepath.Join(q, "ledger.db"), `SELECT COUNT(*) FROM deliveries WHERE file = 'badkey.json' AND msg_id IS NULL`); n != 1 {
		t.Errorf("badkey.json's invalid msg_id was recorded as its key")
	}
}

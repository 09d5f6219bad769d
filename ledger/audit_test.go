package ledger

import (
	"strings"
	"testing"
)

// TestAuditEntrySelect: a selection is marshalled as JSON, nil leaves it
// empty (stored as {}), and one JSON cannot encode is an error naming the
// action, the entry otherwise unchanged.
func TestAuditEntrySelect(t *testing.T) {
	e := AuditEntry{Actor: "os:ann", Via: AuditCLI, Action: "hold"}
	got, err := e.Select(map[string]any{"msg_ids": []string{"m1"}, "note": "why"})
	if err != nil || got.Selection != `{"msg_ids":["m1"],"note":"why"}` || got.Actor != "os:ann" {
		t.Errorf("Select(map): %+v, %v", got, err)
	}
	if got, err := e.Select(nil); err != nil || got.Selection != "" {
		t.Errorf("Select(nil): %+v, %v; want no selection", got, err)
	}
	if _, err := e.Select(func() {}); err == nil || !strings.HasPrefix(err.Error(), "audit hold: selection: ") {
		t.Errorf("Select(func): %v; want an error naming the action", err)
	}
}

package task

import (
	"encoding/json"
	"testing"

	"github.com/spoolq/spool/ledger"
)

// TestAuditSelection: an identity with a client adds it to whatever
// selection it is given, an object's keys kept; one without changes
// nothing.
func TestAuditSelection(t *testing.T) {
	web := Identity{Name: "token:olga", Via: ledger.AuditHTTP, Client: "192.0.2.7"}
	var nilMap map[string]string
	for _, tc := range []struct {
		name string
		who  Identity
		sel  any
		want string
	}{
		{"no client, nil", CLI("alice"), nil, "null"},
		{"no client, object", CLI("alice"), map[string]any{"all": true}, `{"all":true}`},
		{"nil", web, nil, `{"client":"192.0.2.7"}`},
		{"nil map", web, nilMap, `{"client":"192.0.2.7"}`},
		{"object", web, map[string]any{"all": true}, `{"all":true,"client":"192.0.2.7"}`},
		{"struct", web, struct {
			Names []string `json:"names"`
		}{[]string{"a.json"}}, `{"client":"192.0.2.7","names":["a.json"]}`},
		{"no object", web, "a.json", `{"client":"192.0.2.7","selection":"a.json"}`},
	} {
		b, err := json.Marshal(tc.who.AuditSelection(tc.sel))
		if err != nil || string(b) != tc.want {
			t.Errorf("%s: %s %v, want %s", tc.name, b, err, tc.want)
		}
	}
	given := map[string]any{"all": true}
	web.AuditSelection(given)
	if len(given) != 1 {
		t.Errorf("the selection given was changed: %v", given)
	}
}

// TestEntrySelection: the Service's audit entries keep {} for no
// selection from the command line, and name an HTTP client even then.
func TestEntrySelection(t *testing.T) {
	var s Service
	if e := s.entry(CLI("alice"), "", "approve", 1, nil); e.Selection != "{}" {
		t.Errorf("no selection on the command line: %q, want {}", e.Selection)
	}
	web := Identity{Name: "token:olga", Via: ledger.AuditHTTP, Client: "192.0.2.7"}
	if e := s.entry(web, "", "approve", 1, nil); e.Selection != `{"client":"192.0.2.7"}` {
		t.Errorf("no selection over HTTP: %q, want the client", e.Selection)
	}
	if e := s.entry(web, "", "replay", 0, map[string]any{"all": true}); e.Selection != `{"all":true,"client":"192.0.2.7"}` {
		t.Errorf("a selection over HTTP: %q, want it with the client", e.Selection)
	}
}

// TestAuditEntry: the one builder of an identity's audit entry records
// no role on the command line and the role over HTTP, the command line
// for an identity that names no way in, "(anonymous)" for no name, and
// the writer's host and process.
func TestAuditEntry(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		who                   Identity
		actor, role, via, sel string
	}{
		{"command line", CLI("os:alice"), "os:alice", "", ledger.AuditCLI, "{}"},
		{"http", Identity{Name: "token:olga", Role: RoleOperator, Via: ledger.AuditHTTP, Client: "192.0.2.7"},
			"token:olga", RoleOperator.String(), ledger.AuditHTTP, `{"client":"192.0.2.7","note":"n"}`},
		{"no way in, no name", Identity{Role: RoleApprover}, "(anonymous)", "", ledger.AuditCLI, "{}"},
	} {
		var sel any
		if tc.who.Via == ledger.AuditHTTP {
			sel = map[string]any{"note": "n"}
		}
		e, err := tc.who.AuditEntry("pause", sel, "h1", 42)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if e.Actor != tc.actor || e.Role != tc.role || e.Via != tc.via || e.Selection != tc.sel ||
			e.Action != "pause" || e.Host != "h1" || e.PID != 42 {
			t.Errorf("%s: %+v, want actor %q role %q via %q selection %s", tc.name, e, tc.actor, tc.role, tc.via, tc.sel)
		}
	}
	if _, err := CLI("a").AuditEntry("pause", func() {}, "h", 1); err == nil {
		t.Error("a selection that does not marshal: no error")
	}
}

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

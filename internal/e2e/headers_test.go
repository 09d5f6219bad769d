//go:build linux

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestContractHeaders: a queue whose spool.conf names the header fields.
// A message with a valid traceparent, tenant and version is processed and
// `spool show` prints its headers (text and --json); one with an all-zero
// trace-id and one with a malformed traceparent are invalid-field dead
// letters naming the field and why; the --sql handler's event, relayed to
// a local HTTP server, carries traceparent with the message's trace-id
// and flags and a new parent-id, Spool-Tenant and Spool-Schema-Version.
func TestContractHeaders(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	writeFile(t, q, "spool.conf", `{"required": ["msg_id"], "headers": {"version": "schema", "trace": "traceparent", "tenant": "tenant"}}`)
	sqlFile := writeFile(t, state, "outbox.sql", outboxSQL)
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		parent  = "00f067aa0ba902b7"
		tp      = "00-" + traceID + "-" + parent + "-01"
	)
	putMessage(t, q, "good.json", `{"msg_id":"good","order_no":"o1","seq":1,"amount":"1.00","schema":"v3","traceparent":"`+tp+`","tenant":"acme"}`)
	putMessage(t, q, "zero.json", `{"msg_id":"zero","order_no":"o2","seq":1,"amount":"1.00","traceparent":"00-00000000000000000000000000000000-`+parent+`-01"}`)
	putMessage(t, q, "upper.json", `{"msg_id":"upper","order_no":"o3","seq":1,"amount":"1.00","traceparent":"00-`+strings.ToUpper(traceID)+`-`+parent+`-01"}`)
	r := run(t, "consume", q, "--sql", sqlFile)
	if st := parseStats(t, r); st.Processed != 1 || st.DeadLetters != 2 {
		t.Fatalf("consume: %+v, want 1 processed and 2 dead letters\n%s", st, r)
	}

	show := mustRun(t, 0, "show", q, "good").stdout
	for _, want := range []string{"version", "v3", "traceparent", tp, "tenant", "acme"} {
		if !strings.Contains(show, want) {
			t.Errorf("spool show good does not say %q:\n%s", want, show)
		}
	}
	var js struct {
		Processed struct {
			Headers struct{ Version, Trace, Tenant string } `json:"headers"`
		} `json:"processed"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, "show", q, "good", "--json").stdout), &js); err != nil {
		t.Fatal(err)
	}
	if h := js.Processed.Headers; h.Version != "v3" || h.Trace != tp || h.Tenant != "acme" {
		t.Errorf("spool show --json: headers %+v", h)
	}
	for name, want := range map[string]string{"zero.json": "trace-id is all zeros", "upper.json": "not lowercase hex"} {
		out := mustRun(t, 0, "show", q, name).stdout
		if !strings.Contains(out, "invalid-field") || !strings.Contains(out, "traceparent") || !strings.Contains(out, want) {
			t.Errorf("spool show %s: want an invalid-field dead letter of traceparent saying %q:\n%s", name, want, out)
		}
	}

	var mu sync.Mutex
	var got []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	mustRun(t, 0, "relay", q, "--to", srv.URL+"/events")
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("%d requests, want the one event", len(got))
	}
	h := got[0]
	sent := h.Get("traceparent")
	parts := strings.Split(sent, "-")
	if len(parts) != 4 || parts[0] != "00" || parts[1] != traceID || parts[3] != "01" || len(parts[2]) != 16 ||
		parts[2] == parent || parts[2] == "0000000000000000" {
		t.Errorf("traceparent %q: want 00-%s-<a new parent-id>-01", sent, traceID)
	}
	if h.Get("Spool-Tenant") != "acme" || h.Get("Spool-Schema-Version") != "v3" {
		t.Errorf("tenant %q, version %q: want acme and v3", h.Get("Spool-Tenant"), h.Get("Spool-Schema-Version"))
	}
}

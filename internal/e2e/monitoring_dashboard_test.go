//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The Grafana dashboard of examples/ops/grafana: its structure, and its
// queries checked by promtool.

// dashboard is the part of a Grafana dashboard the checks read.
type dashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *grafanaDS      `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaDS struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaPanel struct {
	ID         int        `json:"id"`
	Type       string     `json:"type"`
	Title      string     `json:"title"`
	Datasource *grafanaDS `json:"datasource"`
	GridPos    struct{ H, W, X, Y int }
	Targets    []struct {
		Expr       string     `json:"expr"`
		RefID      string     `json:"refId"`
		Datasource *grafanaDS `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's
}

// readDashboard decodes the kit's dashboard and returns it with its
// panels, those of collapsed rows included.
func readDashboard(t *testing.T) (dashboard, []grafanaPanel) {
	t.Helper()
	text, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(text, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var panels []grafanaPanel
	for _, p := range d.Panels {
		panels = append(panels, p)
		panels = append(panels, p.Panels...)
	}
	return d, panels
}

// TestDashboard: the Grafana dashboard is importable as it stands (a
// schema version, a uid, a Prometheus data source variable that every
// query uses, a queue variable over label_values), every query selects
// the chosen queues and names only metrics spool serves, and every
// metric spool serves is on some panel.
func TestDashboard(t *testing.T) {
	t.Parallel()
	d, panels := readDashboard(t)
	if d.SchemaVersion < 36 || d.UID == "" || d.Title == "" {
		t.Errorf("%s: schemaVersion %d, uid %q, title %q: want a schema of Grafana 9 or later, a uid and a title", dashboardFile, d.SchemaVersion, d.UID, d.Title)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		var q string
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Errorf("variable %s: query is not a string: %v", v.Name, err)
		}
		vars[v.Name] = v.Type + " " + q
		if v.Name == "queue" && (v.Datasource == nil || v.Datasource.UID != "${datasource}") {
			t.Errorf("variable queue: data source %+v, want the datasource variable", v.Datasource)
		}
	}
	if vars["datasource"] != "datasource prometheus" {
		t.Errorf("variable datasource: %q, want a data source variable of type prometheus", vars["datasource"])
	}
	if q := vars["queue"]; !regexp.MustCompile(`^query label_values\(spool_\w+, *queue\)$`).MatchString(q) {
		t.Errorf("variable queue: %q, want a query of label_values(spool_..., queue)", q)
	} else {
		for _, m := range promqlMetricNames(strings.TrimPrefix(q, "query ")) {
			if !knownMetric(m) && m != "queue" {
				t.Errorf("variable queue names %s, which spool does not serve", m)
			}
		}
	}

	ids := map[int]bool{}
	shown := map[string]bool{}
	for _, p := range panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d is used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside Grafana's 24 columns", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: data source %+v, %d queries: want the datasource variable and a query", p.Title, p.Datasource, len(p.Targets))
		}
		for _, q := range p.Targets {
			if q.Datasource != nil && q.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q query %s: data source %+v, want the datasource variable", p.Title, q.RefID, q.Datasource)
			}
			if !strings.Contains(q.Expr, `queue=~"$queue"`) {
				t.Errorf("panel %q query %s: %q does not select queue=~\"$queue\"", p.Title, q.RefID, q.Expr)
			}
			names := promqlMetricNames(q.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q query %s: %q names no metric", p.Title, q.RefID, q.Expr)
			}
			for _, m := range names {
				if !knownMetric(m) {
					t.Errorf("panel %q query %s: names %s, which spool does not serve (spoolMetrics)", p.Title, q.RefID, m)
				}
				shown[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count"), "_sum")] = true
			}
		}
	}
	for _, m := range spoolMetrics {
		if !shown[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
}

// TestDashboardPromtool: every query of the dashboard is valid PromQL
// once Grafana has put in its variables: promtool checks them as the
// expressions of recording rules.
func TestDashboardPromtool(t *testing.T) {
	t.Parallel()
	bin := promtool(t, "the dashboard's queries are")
	_, panels := readDashboard(t)
	vars := strings.NewReplacer(`$queue`, `.*`, `$__rate_interval`, `1m`, `$__interval`, `1m`)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range panels {
		for _, q := range p.Targets {
			expr, err := json.Marshal(vars.Replace(q.Expr)) // a JSON string is a YAML one
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "      - record: dashboard:panel_%d:%s\n        expr: %s\n", p.ID, q.RefID, expr)
			n++
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard.yml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runPromtool(t, bin, dir, "check", "rules", "dashboard.yml")
	if want := fmt.Sprintf("SUCCESS: %d rules found", n); !strings.Contains(out, want) {
		t.Errorf("promtool check rules on the dashboard's queries printed %q, want %q", out, want)
	}
}

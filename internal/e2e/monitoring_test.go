//go:build linux

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/internal/testenv"
	"github.com/spoolq/spool/metrics"
	"github.com/spoolq/spool/queue"
)

// The monitoring half of the operations kit (examples/ops/prometheus and
// examples/ops/grafana): the names its expressions use, its alert rules
// checked and unit-tested with promtool, its runbook links, and the
// dashboard's structure.

// spoolMetrics are the metrics spool serves on --listen (issue 17): the one
// list the alert rules and the dashboard are checked against. Keep it
// aligned with package metrics; a name here that spool does not serve
// makes a rule that never fires and a panel that stays empty.
var spoolMetrics = []string{
	"spool_queue_messages",
	"spool_queue_oldest_age_seconds",
	"spool_deliveries_total",
	"spool_dead_letters_total",
	"spool_conflicts_total",
	"spool_recovered_claims_total",
	"spool_handler_duration_seconds",       // histogram
	"spool_ledger_commit_duration_seconds", // histogram
	"spool_last_commit_timestamp_seconds",
	"spool_watch_rescans_total",
	"spool_watch_overflows_total",
}

// spoolHistograms are the histograms of spoolMetrics, served as their
// _bucket, _sum and _count series.
var spoolHistograms = []string{"spool_handler_duration_seconds", "spool_ledger_commit_duration_seconds"}

// otherMetrics are the series that come from elsewhere: Prometheus's own
// for every target (up, scrape_*), and the prefixes of the client's
// standard Go and process collectors.
var (
	otherMetrics  = []string{"up", "scrape_duration_seconds", "scrape_samples_scraped"}
	otherPrefixes = []string{"go_", "process_"}
)

// alertNames are the alerts the kit must hold (issue 17, part 7), in the
// order of the rules file.
var alertNames = []string{
	"SpoolBacklogHigh", "SpoolOldestMessageTooOld", "SpoolDeadLetters",
	"SpoolNotCommitting", "SpoolConflicts", "SpoolTargetDown",
}

const (
	promDir       = opsDir + "/prometheus"
	rulesFile     = promDir + "/spool-alerts.yml"
	rulesTestFile = promDir + "/spool-alerts.test.yml"
	dashboardFile = opsDir + "/grafana/spool-dashboard.json"
	operationsDoc = "../../docs/OPERATIONS.md"
)

// knownMetric says whether name is one spool serves or one of otherMetrics.
func knownMetric(name string) bool {
	if slices.Contains(spoolMetrics, name) || slices.Contains(otherMetrics, name) {
		return true
	}
	for _, h := range spoolHistograms {
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			if name == h+s {
				return true
			}
		}
	}
	for _, p := range otherPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// promqlWords are the PromQL words that are not metric names when no '('
// follows them: aggregation operators (which may take "by (...)" before
// their parentheses), set and matching keywords, modifiers and literals.
var promqlWords = []string{
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio",
	"and", "or", "unless", "atan2", "bool", "offset", "start", "end", "inf", "nan",
}

// promqlLabelLists are the keywords followed by a parenthesized list of
// label names, which are not metric names either.
var promqlLabelLists = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// promqlMetricNames returns the metric names a PromQL expression selects,
// in order, with repeats: identifiers outside strings, label matchers
// ({...}), ranges ([...]) and label lists (by (...)), that are neither a
// function (a '(' follows) nor a keyword. Grafana variables ($queue,
// ${datasource}, $__rate_interval) are skipped, and keywords are told
// apart from names whatever their case, as PromQL does. It is a scanner, not a
// parser: promtool checks the syntax.
func promqlMetricNames(expr string) []string {
	var names []string
	isStart := func(c byte) bool { return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || '0' <= c && c <= '9' }
	skipSpace := func(i int) int {
		for i < len(expr) && strings.ContainsRune(" \t\r\n", rune(expr[i])) {
			i++
		}
		return i
	}
	// skipTo returns the index after the close matching the open at i,
	// skipping strings inside.
	skipTo := func(i int, open, close byte) int {
		depth := 0
		for ; i < len(expr); i++ {
			switch c := expr[i]; {
			case c == '"' || c == '\'' || c == '`':
				i = skipString(expr, i) - 1
			case c == open:
				depth++
			case c == close:
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(expr, i)
		case c == '{':
			i = skipTo(i, '{', '}')
		case c == '[':
			i = skipTo(i, '[', ']')
		case c == '#': // a comment, to the end of the line
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				i = skipTo(i, '{', '}')
			}
			for i < len(expr) && isPart(expr[i]) {
				i++
			}
		case '0' <= c && c <= '9' || c == '.':
			for i < len(expr) && (isPart(expr[i]) || expr[i] == '.') {
				i++
			}
		case isStart(c):
			j := i
			for j < len(expr) && isPart(expr[j]) {
				j++
			}
			word := expr[i:j]
			next := skipSpace(j)
			switch keyword := strings.ToLower(word); {
			case slices.Contains(promqlLabelLists, keyword):
				if next < len(expr) && expr[next] == '(' {
					j = skipTo(next, '(', ')')
				}
			case slices.Contains(promqlWords, keyword):
			case next < len(expr) && expr[next] == '(':
				// a function
			default:
				names = append(names, word)
			}
			i = j
		default:
			i++
		}
	}
	return names
}

// skipString returns the index after the string literal that opens at i.
func skipString(s string, i int) int {
	q := s[i]
	for i++; i < len(s); i++ {
		if s[i] == '\\' && q != '`' {
			i++
			continue
		}
		if s[i] == q {
			return i + 1
		}
	}
	return i
}

// TestPromQLMetricNames: the scanner the name checks rely on finds the
// metric names and nothing else.
func TestPromQLMetricNames(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string][]string{
		`up{job="spool"} == 0`: {"up"},
		`max by (queue, stage) (spool_queue_messages{queue=~"$queue", stage=~"inbox|processing"}) > 10000`: {"spool_queue_messages"},
		`sum(rate(a_total[5m])) by (le) / on (x) group_left (y) b`:                                         {"a_total", "b"},
		`histogram_quantile(0.99, sum by (kind, le) (rate(h_bucket{queue=~"$queue"}[$__rate_interval])))`:  {"h_bucket"},
		`(x unless x offset 15m) and on (job, instance) (up offset 15m == 1 or p > time() - 900)`:          {"x", "x", "up", "p"},
		`time() - max by (queue) (last > 0)`:                                                               {"last"},
		`count_values("v", m{l="a } b"})`:                                                                  {"m"},
		`${datasource} + 1e3 + 0.5 + Inf`:                                                                  nil,
	} {
		if got := promqlMetricNames(expr); !slices.Equal(got, want) {
			t.Errorf("promqlMetricNames(%q) = %q, want %q", expr, got, want)
		}
	}
}

// alertRule is one alert of the rules file, as read by readAlertRules.
type alertRule struct {
	name, expr, forDuration, severity string
	annotations                       map[string]string
}

// readAlertRules reads the alerts of a Prometheus rules file laid out as
// the kit's is: "- alert: NAME" starts a rule, "expr: |" a block of lines
// indented deeper, and annotations are one "key: value" line each. It is
// not a YAML parser (promtool is, in TestAlertRulesPromtool, which also
// checks that both find as many rules); a rule it cannot read fails the
// test instead of being skipped.
func readAlertRules(t *testing.T, path string) []alertRule {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rules []alertRule
	var block *strings.Builder
	blockIndent := 0
	indentOf := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		trimmed := strings.TrimSpace(l)
		if block != nil {
			if trimmed == "" || indentOf(l) > blockIndent {
				block.WriteString(trimmed + "\n")
				continue
			}
			rules[len(rules)-1].expr = block.String()
			block = nil
		}
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		key, value, ok := strings.Cut(strings.TrimPrefix(trimmed, "- "), ":")
		if !ok {
			t.Fatalf("%s:%d: %q is not a key: value line", path, n, l)
		}
		value = strings.TrimSpace(value)
		if strings.HasPrefix(value, `"`) {
			if value, err = strconv.Unquote(value); err != nil {
				t.Fatalf("%s:%d: %s: %v", path, n, key, err)
			}
		}
		switch key {
		case "record":
			t.Fatalf("%s:%d: a recording rule: the kit has alerts only", path, n)
		case "alert":
			rules = append(rules, alertRule{name: value, annotations: map[string]string{}})
			continue
		}
		if len(rules) == 0 {
			continue
		}
		r := &rules[len(rules)-1]
		switch key {
		case "expr":
			if value == "|" || value == "|-" || value == ">" || value == ">-" {
				block, blockIndent = &strings.Builder{}, indentOf(l)
			} else {
				r.expr = value
			}
		case "for":
			r.forDuration = value
		case "severity":
			r.severity = value
		case "summary", "description", "runbook", "runbook_url":
			r.annotations[key] = value
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if block != nil {
		rules[len(rules)-1].expr = block.String()
	}
	return rules
}

// headingAnchors returns the anchors the headings of a Markdown file get
// (GitHub's: lower case, punctuation dropped, spaces to hyphens), each
// with the text of its section up to the next heading.
func headingAnchors(t *testing.T, path string) map[string]string {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	anchor := ""
	inCode := false
	for _, l := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if !inCode && strings.HasPrefix(l, "#") {
			var b strings.Builder
			for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#"))) {
				switch {
				case r == ' ':
					b.WriteRune('-')
				case r == '-' || r == '_' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9':
					b.WriteRune(r)
				}
			}
			anchor = b.String()
			sections[anchor] = ""
			continue
		}
		if anchor != "" {
			sections[anchor] += l + "\n"
		}
	}
	return sections
}

// TestAlertRules: the kit holds every alert the issue asks for; each
// names only metrics spool serves, has a severity, a summary, a
// description and a runbook naming a section of docs/OPERATIONS.md that
// exists and names the alert, and is unit-tested both firing and not.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	rules := readAlertRules(t, rulesFile)
	var names []string
	for _, r := range rules {
		names = append(names, r.name)
	}
	if !slices.Equal(names, alertNames) {
		t.Errorf("%s holds the alerts %q, want %q", rulesFile, names, alertNames)
	}
	sections := headingAnchors(t, operationsDoc)
	tested := ruleTestCases(t, rulesTestFile)
	for _, r := range rules {
		if strings.TrimSpace(r.expr) == "" {
			t.Errorf("%s: no expr", r.name)
		}
		for _, m := range promqlMetricNames(r.expr) {
			if !knownMetric(m) {
				t.Errorf("%s: expr names %s, which spool does not serve (spoolMetrics)", r.name, m)
			}
		}
		if r.severity != "warning" && r.severity != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", r.name, r.severity)
		}
		for _, a := range []string{"summary", "description", "runbook"} {
			if r.annotations[a] == "" {
				t.Errorf("%s: no %s annotation", r.name, a)
			}
		}
		doc, anchor, ok := strings.Cut(r.annotations["runbook"], "#")
		if !ok || doc != "docs/OPERATIONS.md" {
			t.Errorf("%s: runbook %q, want docs/OPERATIONS.md#SECTION", r.name, r.annotations["runbook"])
		} else if section, ok := sections[anchor]; !ok {
			t.Errorf("%s: runbook %q: docs/OPERATIONS.md has no heading with that anchor", r.name, r.annotations["runbook"])
		} else if !strings.Contains(section, r.name) {
			t.Errorf("%s: runbook section %q does not name the alert", r.name, anchor)
		}
		if c := tested[r.name]; c.firing == 0 || c.silent == 0 {
			t.Errorf("%s: %s has %d test cases where it fires and %d where it does not, want at least one of each", r.name, rulesTestFile, c.firing, c.silent)
		}
	}
}

// ruleCases counts an alert's test cases in a promtool test file.
type ruleCases struct{ firing, silent int }

// ruleTestCases counts, per alert, the alert_rule_test cases of a promtool
// test file that expect it to fire (exp_alerts) and those that expect
// nothing.
func ruleTestCases(t *testing.T, path string) map[string]ruleCases {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]ruleCases{}
	alertname := regexp.MustCompile(`alertname: *(\w+)`)
	name, firing := "", false
	flush := func() {
		if name == "" {
			return
		}
		c := cases[name]
		if firing {
			c.firing++
		} else {
			c.silent++
		}
		cases[name] = c
		name, firing = "", false
	}
	for _, l := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if strings.Contains(l, "eval_time:") || strings.Contains(l, "- interval:") {
			flush()
		}
		if m := alertname.FindStringSubmatch(l); m != nil && !strings.Contains(l, "exp_labels") {
			name = m[1]
		}
		if strings.Contains(l, "exp_alerts:") {
			firing = true
		}
	}
	flush()
	return cases
}

// promtool returns the path of promtool, skipping the test, which checks
// what, where it is not installed (Debian's prometheus package ships it);
// CI must have it.
func promtool(t *testing.T, what string) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("promtool is not installed (apt-get install --no-install-recommends prometheus; .ci/run fetches it): %s not checked", what))
	}
	return p
}

// runPromtool runs promtool in dir and returns its output, failing the
// test when it fails.
func runPromtool(t *testing.T, bin, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestAlertRulesPromtool: promtool accepts the rules and the example
// prometheus.yml, finds as many rules as readAlertRules, and every unit
// test of spool-alerts.test.yml passes.
func TestAlertRulesPromtool(t *testing.T) {
	t.Parallel()
	bin := promtool(t, "the alert rules and their unit tests are")
	out := runPromtool(t, bin, promDir, "check", "rules", "spool-alerts.yml")
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(readAlertRules(t, rulesFile))); !strings.Contains(out, want) {
		t.Errorf("promtool check rules printed %q, want %q (readAlertRules and promtool disagree)", out, want)
	}
	runPromtool(t, bin, promDir, "check", "config", "prometheus.yml")
	runPromtool(t, bin, promDir, "test", "rules", "spool-alerts.test.yml")
}

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

// TestMonitoringNamesServed holds spoolMetrics to what package metrics
// registers: every name the rules and the dashboard may use is served, and
// nothing spool serves is missing from the list. Each Observer method is
// called once, so that the vectors and histograms have a series to gather.
func TestMonitoringNamesServed(t *testing.T) {
	m := metrics.New()
	d := &spool.Delivery{File: "m.json"}
	m.Delivered(d, spool.Result{Outcome: spool.OutcomeProcessed, Conflict: true})
	m.Delivered(d, spool.Result{Outcome: spool.OutcomeDeadLetter, Reject: &spool.RejectError{Reason: spool.ReasonParse}})
	m.Committed(1, time.Millisecond)
	m.Called("post", "ok", time.Millisecond)
	m.Recovered(1)
	m.Rescanned(true)
	// The queue gauges are served once a listing has been made.
	root := filepath.Join(t.TempDir(), "q")
	if err := queue.Init(root); err != nil {
		t.Fatal(err)
	}
	dir, err := queue.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	refreshed := make(chan struct{})
	go func() { defer close(refreshed); m.Refresh(ctx, dir, time.Hour, nil) }()
	defer func() { cancel(); <-refreshed }()
	served := map[string]bool{}
	for deadline := time.Now().Add(time.Minute); ; {
		fams, err := m.Registry().Gather()
		if err != nil {
			t.Fatalf("gather: %v", err)
		}
		clear(served)
		for _, f := range fams {
			if strings.HasPrefix(f.GetName(), "spool_") {
				served[f.GetName()] = true
			}
		}
		if served["spool_queue_oldest_age_seconds"] || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // until the first listing
	}
	for _, name := range spoolMetrics {
		if !served[name] {
			t.Errorf("%s is in spoolMetrics (the rules and the dashboard may use it) but package metrics does not serve it", name)
		}
		delete(served, name)
	}
	for name := range served {
		t.Errorf("package metrics serves %s, which spoolMetrics does not list", name)
	}
}

//go:build linux

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The alert rules of examples/ops/prometheus: their names, runbook links
// into docs/OPERATIONS.md, and their unit tests under promtool.

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

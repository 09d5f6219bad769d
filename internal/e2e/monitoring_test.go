//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
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
// dashboard's structure. Here the names and promtool; the alert rules in
// monitoring_alerts_test.go, the dashboard in monitoring_dashboard_test.go.

// spoolMetrics are the metrics spool serves on --listen: the one
// list the alert rules and the dashboard are checked against. Keep it
// aligned with package metrics; a name here that spool does not serve
// makes a rule that never fires and a panel that stays empty.
var spoolMetrics = []string{
	"spool_queue_messages",
	"spool_queue_oldest_age_seconds",
	"spool_inbox_waiting_for_done_file",
	"spool_inbox_waiting_for_done_file_oldest_age_seconds",
	"spool_inbox_not_taken",
	"spool_deliveries_total",
	"spool_dead_letters_total",
	"spool_conflicts_total",
	"spool_recovered_claims_total",
	"spool_handler_duration_seconds",       // histogram
	"spool_ledger_commit_duration_seconds", // histogram
	"spool_last_commit_timestamp_seconds",
	"spool_watch_rescans_total",
	"spool_watch_overflows_total",
	"spool_dedup_window_absorbed_total",
	"spool_dedup_window_errors_total",
	"spool_outbox_pending_rows",
	"spool_outbox_oldest_pending_age_seconds",
	"spool_outbox_parked_rows",
	"spool_relay_published_total",
	"spool_relay_failures_total",
	"spool_relay_parked_total",
	"spool_paused",
	"spool_held_msg_ids",
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

// alertNames are the alerts the kit must hold, in the
// order of the rules file.
var alertNames = []string{
	"SpoolBacklogHigh", "SpoolOldestMessageTooOld", "SpoolDeadLetters",
	"SpoolNotCommitting", "SpoolConflicts", "SpoolTargetDown", "SpoolRelayStuck", "SpoolPaused",
	"SpoolDoneFileMissing",
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
	m.RelayTarget("nats://127.0.0.1:4222/events")
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
	outboxRead := make(chan struct{})
	go func() {
		defer close(outboxRead)
		m.RefreshOutbox(ctx, func(context.Context) (metrics.OutboxState, error) {
			return metrics.OutboxState{Pending: 1, Oldest: time.Now()}, nil
		}, time.Hour, nil)
	}()
	holdsRead := make(chan struct{})
	go func() {
		defer close(holdsRead)
		m.RefreshHolds(ctx, func(context.Context) (metrics.HoldState, error) {
			return metrics.HoldState{Paused: true, HeldIDs: 1}, nil
		}, nil)
	}()
	defer func() { cancel(); <-refreshed; <-outboxRead; <-holdsRead }()
	served := map[string]bool{}
	poll(time.Minute, 10*time.Millisecond, func() bool { // until the first listing
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
		return served["spool_queue_oldest_age_seconds"] && served["spool_outbox_pending_rows"] && served["spool_paused"]
	})
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

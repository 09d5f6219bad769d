//go:build linux

package e2e

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The batch format by flag (docs/OPERATIONS.md, "Batch files"): consume's
// --format, --delimiter... apply for one run on a queue whose spool.conf
// sets no format, are checked as spool.conf's keys are, and are refused
// where they contradict the format spool.conf sets, which the other tools
// read.

// TestBatchFormatFlag: a CSV consumed with --format csv on a queue whose
// spool.conf sets no format (and on one without spool.conf) is read a
// record a message, as with spool.conf's format; consume's configuration
// line says the format came from the flags.
func TestBatchFormatFlag(t *testing.T) {
	t.Parallel()
	for _, conf := range []string{`{"key_field": "msg_id"}`, ""} {
		q := filepath.Join(t.TempDir(), "q")
		if conf != "" {
			q = batchQueue(t, conf)
		} else {
			mustRun(t, 0, "init", q)
		}
		data, badLines := ordersCSV(50, func(i int) bool { return i == 7 })
		putBytes(t, q, "orders.csv", data)
		r := mustRun(t, 0, "consume", q, "--format", "csv", "--include", "*.csv")
		if st := parseStats(t, r); st != (consumeStats{Processed: 49, DeadLetters: 1}) {
			t.Fatalf("spool.conf %q: %+v, want 49 processed and 1 dead letter\n%s", conf, st, r)
		}
		requireOrdersDone(t, q, badLines)
		if !strings.Contains(r.stderr, `settings.format="csv include=*.csv"`) || !strings.Contains(r.stderr, "from.format=flag") {
			t.Errorf("spool.conf %q: the configuration line does not say the format and its flags:\n%s", conf, r.stderr)
		}
	}
}

// TestBatchFormatFlagContradiction: on a queue whose spool.conf sets a
// format, a flag that says otherwise is refused in one line naming
// spool.conf, the key and the flag, before anything moves; a flag that
// says what spool.conf says (its default included) is accepted.
func TestBatchFormatFlagContradiction(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv", "delimiter": ";"}`)
	putBytes(t, q, "orders.csv", []byte("msg_id;order_no;seq;amount\nm1;o1;1;1.00\n"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "jsonl"}, `sets format "csv", and --format says "jsonl"`},
		{[]string{"--delimiter", ","}, `sets delimiter ";", and --delimiter says ","`},
		{[]string{"--comment", "#"}, `sets the format "csv", whose comment is "", and --comment says "#"`},
	} {
		r := run(t, append([]string{"consume", q}, c.args...)...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 2 || len(lines) != 1 || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, "spool.conf") {
			t.Errorf("consume %q: want exit 2 and one line saying %s\n%s", c.args, c.want, r)
		}
		if got := stageNames(t, q, inbox); len(got) != 1 {
			t.Fatalf("consume %q moved files: inbox/ holds %q", c.args, got)
		}
	}
	if st := parseStats(t, mustRun(t, 0, "consume", q, "--format", "csv", "--delimiter", ";", "--include", "*.csv")); st.Processed != 1 {
		t.Fatalf("flags that say what spool.conf says: %+v, want 1 processed", st)
	}
	// spool check reports the contradiction as a problem.
	if r := run(t, "check", q, "--format", "xml", "--record", "Order"); r.code != 1 || !strings.Contains(r.stderr, `and --format says "xml"`) {
		t.Errorf("check --format xml on a csv queue: want exit 1 naming the contradiction\n%s", r)
	}
}

// TestBatchFormatFlagBad: a format flag spool.conf would refuse is refused
// with spool.conf's error in one line (exit 2), before the queue is
// touched, also when the queue has no spool.conf.
func TestBatchFormatFlagBad(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	putBytes(t, q, "orders.csv", []byte("msg_id,order_no,seq,amount\nm1,o1,1,1.00\n"))
	for _, c := range []struct {
		args []string
		want *regexp.Regexp
	}{
		{[]string{"--format", "cvs"}, regexp.MustCompile(`format "cvs" is unknown: the formats are json, jsonl, csv, xml`)},
		{[]string{"--format", "csv", "--delimiter", ";;"}, regexp.MustCompile(`delimiter ";;" is not one character`)},
		{[]string{"--format", ""}, regexp.MustCompile(`^spool: consume: --format: bad format: format is empty`)},
		{[]string{"--delimiter", ";"}, regexp.MustCompile(`delimiter is for csv, and the format is json`)},
		{[]string{"--format", "xml"}, regexp.MustCompile(`the xml format needs "record"`)},
		{[]string{"--format", "csv", "--encoding", "klingon"}, regexp.MustCompile(`klingon`)},
	} {
		r := run(t, append([]string{"consume", q}, c.args...)...)
		if r.code != 2 || strings.Count(r.stderr, "\n") != 1 || !c.want.MatchString(r.stderr) {
			t.Errorf("consume %q: want exit 2 and one line matching %s\n%s", c.args, c.want, r)
		}
	}
	if got := stageNames(t, q, inbox); len(got) != 1 {
		t.Fatalf("a refused run moved files: inbox/ holds %q", got)
	}
}

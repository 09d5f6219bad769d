//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// logQueue holds 5 valid messages and 2 dead letters.
func logQueue(t *testing.T) string {
	t.Helper()
	q, _ := workQueue(t)
	for i := range 5 {
		putMessage(t, q, fmt.Sprintf("ok%d.json", i), orderMessage(fmt.Sprint(i), "O", i+1, "1"))
	}
	putMessage(t, q, "bad.json", "{")
	putMessage(t, q, "nokey.json", `{"order_no":"O"}`)
	return q
}

// TestLogLevels: at the default level consume logs its configuration
// once, then one record per dead letter (file, reason, detail) and none
// per message that went well; -v is the default; debug adds one per
// message; warn keeps only problems; json gives one object a line with
// the same fields.
func TestLogLevels(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"-v"}, {"--log-level", "info"}} {
		q := logQueue(t)
		r := mustRun(t, 0, append([]string{"consume", q}, args...)...)
		ls := lines(r.stderr)
		if len(ls) != 3 || !strings.Contains(ls[0], "level=INFO msg=configuration ") {
			t.Fatalf("consume %q: %d lines on stderr, want the configuration and one per dead letter (2)\n%s", args, len(ls), r)
		}
		for i, want := range []string{`file=bad.json stored=bad.json reason=parse detail="parse: `, `file=nokey.json stored=nokey.json reason=missing-field detail="missing-field: msg_id`} {
			if !strings.Contains(ls[i+1], `level=INFO msg="dead letter" `+want) {
				t.Errorf("consume %q: line %q, want a dead-letter record with %s", args, ls[i+1], want)
			}
		}
	}

	q := logQueue(t)
	r := mustRun(t, 0, "consume", q, "--log-level", "warn")
	if r.stderr != "" {
		t.Errorf("--log-level warn: stderr %q, want nothing", r.stderr)
	}

	q = logQueue(t)
	r = mustRun(t, 0, "consume", q, "--log-level", "debug", "--log-format", "json")
	delivered := map[string]string{}
	dead := map[string]string{}
	for _, l := range lines(r.stderr) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("--log-format json: line %q is not a JSON object: %v", l, err)
		}
		if rec["time"] == nil || rec["level"] == nil {
			t.Errorf("record %q has no time or level", l)
		}
		file, _ := rec["file"].(string)
		switch rec["msg"] {
		case "delivered":
			delivered[file], _ = rec["outcome"].(string)
			if rec["level"] != "DEBUG" {
				t.Errorf("record %q: want level DEBUG", l)
			}
		case "dead letter":
			dead[file], _ = rec["reason"].(string)
			if detail, _ := rec["detail"].(string); rec["level"] != "INFO" || detail == "" {
				t.Errorf("record %q: want level INFO and a detail", l)
			}
		}
	}
	if len(delivered) != 7 || delivered["ok0.json"] != "processed" || delivered["bad.json"] != "dead-letter" {
		t.Errorf("debug records of deliveries: %v, want all 7 messages with their outcome\n%s", delivered, r.stderr)
	}
	if fmt.Sprint(dead) != "map[bad.json:parse nokey.json:missing-field]" {
		t.Errorf("dead-letter records: %v", dead)
	}

	for _, bad := range [][]string{{"--log-level", "loud"}, {"--log-level", "INFO"}, {"--log-format", "xml"}} {
		r := run(t, append([]string{"consume", logQueue(t)}, bad...)...)
		if r.code != 2 || len(lines(r.stderr)) != 1 || !strings.Contains(r.stderr, bad[0]) {
			t.Errorf("consume %q: want exit 2 and one line naming the flag\n%s", bad, r)
		}
	}
}

// TestLogRecoveryAndJSONWarnings: a recovery of a killed consumer's claims
// is one record at the default level (and one more for its reservations,
// once its handler's process is gone); with --log-format json the command's
// own warnings and its final error are records too.
func TestLogRecoveryAndJSONWarnings(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	putMessage(t, q, "slow.json", orderMessage("1", "O", 1, "1"))
	started := filepath.Join(state, "started")
	p := start(t, "consume", q, "--exec", "touch "+shellQuote(started)+"; sleep 60")
	waitFor(t, time.Minute, "the handler to start", func() bool { _, err := os.Stat(started); return err == nil })
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	// A stale temp file of a killed producer, for a warning.
	tmp := writeFile(t, filepath.Join(q, inbox), ".spool-tmp-0123456789abcdef", "half")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(tmp, old, old); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, 0, "consume", q, "--log-format", "json")
	var recovered, released, warned, config int
	for _, l := range lines(r.stderr) {
		var rec struct {
			Level, Msg, Command string
			ToInbox             int `json:"to_inbox"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("line %q is not a JSON object: %v", l, err)
		}
		switch {
		case rec.Msg == "recovered claims of dead consumers" && rec.Level == "INFO" && rec.ToInbox == 1:
			recovered++
		case rec.Msg == "released reservations of a dead consumer" && rec.Level == "INFO":
			// Once the killed handler's process is gone too (its calls
			// lock free), its msg_id's reservation goes as well.
			released++
		case rec.Level == "WARN" && rec.Command == "consume" && strings.Contains(rec.Msg, ".spool-tmp-0123456789abcdef"):
			warned++
		case rec.Msg == "configuration" && rec.Level == "INFO":
			config++
		default:
			t.Errorf("unexpected record %q", l)
		}
	}
	if recovered != 1 || warned != 1 || config != 1 || released > 1 {
		t.Errorf("%d recovery, %d temp-file and %d configuration records, want 1 of each (and %d releases, at most 1)\n%s", recovered, warned, config, released, r)
	}
	if st := parseStats(t, r); st.Recovered != 1 || st.Processed != 1 {
		t.Errorf("stats %+v, want 1 recovered, 1 processed", st)
	}

	// The final error: one ERROR record, the exit status unchanged.
	r = run(t, "consume", t.TempDir(), "--log-format", "json")
	var rec struct {
		Level, Msg, Command string
		Exit                int
	}
	if ls := lines(r.stderr); r.code != 2 || len(ls) != 1 || json.Unmarshal([]byte(ls[0]), &rec) != nil ||
		rec.Level != "ERROR" || rec.Command != "consume" || rec.Exit != 2 || !strings.Contains(rec.Msg, "spool init") {
		t.Errorf("consume of a directory that is not a queue, json: want exit 2 and one ERROR record\n%s", r)
	}
	// In text it stays the house line.
	r = run(t, "consume", t.TempDir())
	if r.code != 2 || !strings.HasPrefix(r.stderr, "spool: consume: ") || len(lines(r.stderr)) != 1 {
		t.Errorf("consume of a directory that is not a queue: want exit 2 and one line\n%s", r)
	}
}

// backlog fills inbox/ with n valid messages.
func backlog(t *testing.T, q string, n int) {
	t.Helper()
	for i := range n {
		putMessage(t, q, fmt.Sprintf("%05d.json", i), orderMessage(fmt.Sprint(i), "O", i+1, "1"))
	}
}

// progressMarks are what the progress bar draws and no log line holds.
var progressMarks = []string{"draining", "msg/s", "\r"}

// TestProgressBarNotOnAPipe: with stderr a pipe a large drain writes
// nothing of a progress bar (and, with no dead letter, nothing but its
// configuration).
func TestProgressBarNotOnAPipe(t *testing.T) {
	t.Parallel()
	q, _ := workQueue(t)
	backlog(t, q, 1200)
	r := mustRun(t, 0, "consume", q)
	if ls := lines(r.stderr); len(ls) != 1 || !strings.HasPrefix(ls[0], "time=") || !strings.Contains(ls[0], " msg=configuration ") {
		t.Errorf("a drain with stderr a pipe wrote %q to it, want only the configuration record", r.stderr)
	}
}

// TestProgressBarOnATerminal: with stderr a terminal, a drain of 1000
// messages or more shows a bar with done/total and a rate; a smaller one,
// --progress=false and --log-format json do not, and stdout keeps only
// the summary line.
func TestProgressBarOnATerminal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n    int
		args []string
		bar  bool
	}{
		{1200, nil, true},
		{1200, []string{"--progress=false"}, false},
		{1200, []string{"--log-format", "json"}, false},
		{999, nil, false},
	} {
		t.Run(fmt.Sprintf("%d%s", c.n, strings.Join(c.args, "")), func(t *testing.T) {
			t.Parallel() // each waits on its own consumer
			q, _ := workQueue(t)
			backlog(t, q, c.n)
			stdout, tty := runOnTerminal(t, append([]string{"consume", q}, c.args...)...)
			if want := fmt.Sprintf("processed=%d duplicates=0 dead-letters=0 recovered=0\n", c.n); stdout != want {
				t.Errorf("%d messages %q: stdout %q, want %q", c.n, c.args, stdout, want)
			}
			// The terminal ends the log's lines "\r\n" (onlcr): a bar's
			// "\r" is one alone.
			drawn := strings.ReplaceAll(tty, "\r\n", "\n")
			for _, m := range progressMarks {
				if strings.Contains(drawn, m) != c.bar {
					t.Errorf("%d messages %q: the terminal shows %q: %v, want %v\n%q", c.n, c.args, m, !c.bar, c.bar, tty)
				}
			}
			// The last drawing is always the full bar, done/total.
			if c.bar && !strings.Contains(tty, fmt.Sprintf("(%d/%d, ", c.n, c.n)) {
				t.Errorf("%d messages: the bar does not show done/total:\n%q", c.n, tty)
			}
		})
	}
}

// runOnTerminal runs spool with stderr a pseudo-terminal (stdout a pipe)
// and returns stdout and what reached the terminal.
func runOnTerminal(t *testing.T, args ...string) (stdout, tty string) {
	t.Helper()
	return runTerminal(t, false, args...)
}

// runTerminal runs spool with stderr a pseudo-terminal, or stdout when
// onStdout, the other a pipe, and returns what reached the pipe and what
// reached the terminal.
func runTerminal(t *testing.T, onStdout bool, args ...string) (pipe, tty string) {
	t.Helper()
	ptm, pts, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here (%v): what spool shows a terminal is not tested", err)
	}
	defer ptm.Close()
	cmd := exec.Command(spoolBin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, pts
	if onStdout {
		cmd.Stdout, cmd.Stderr = pts, &out
	}
	if err := cmd.Start(); err != nil {
		pts.Close()
		t.Fatal(err)
	}
	pts.Close() // the child holds it now: reading ends when it exits
	var term bytes.Buffer
	read := make(chan struct{})
	go func() { _, _ = io.Copy(&term, ptm); close(read) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(cmdTimeout):
		_ = cmd.Process.Kill()
		t.Fatalf("spool %q did not finish within %v", args, cmdTimeout)
	}
	if err != nil {
		t.Fatalf("spool %q: %v\n%s", args, err, out.String())
	}
	select {
	case <-read: // EIO once the last holder of the terminal is gone
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal was not closed after spool exited")
	}
	return out.String(), term.String()
}

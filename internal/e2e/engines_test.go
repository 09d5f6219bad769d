//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/testenv"
	"github.com/spoolq/spool/ledger/ledgertest"
)

// sessionStep is one command of the scripted operator session of
// TestCommandSuiteEngines: its arguments after the queue directory, with
// --db added for the commands that take it, and a name for messages.
type sessionStep struct {
	name string
	args []string // "Q" stands for the queue directory
	db   bool     // the command takes --db
	// before runs first, as an operator or a producer acts between
	// commands (a file enqueued).
	before func(t *testing.T, q string)
}

// engineSession is the scripted session: a queue initialised, messages
// enqueued (valid ones, a redelivery with the same content and one with
// other content, a poison file and one that lacks a field, an order with
// a gap), consumed, looked at with every report in its text and --json
// forms, a dead letter replayed and consumed again, one discarded,
// checked, pruned, and audited.
func engineSession(src string) []sessionStep {
	step := func(name string, db bool, args ...string) sessionStep {
		return sessionStep{name: name, args: args, db: db}
	}
	return []sessionStep{
		step("init", true, "init", "Q"),
		step("enqueue", false, "enqueue", "Q", filepath.Join(src, "a.json"), filepath.Join(src, "b.json"),
			filepath.Join(src, "c.json"), filepath.Join(src, "d.json"), filepath.Join(src, "a-again.json"),
			filepath.Join(src, "b-other.json"), filepath.Join(src, "poison.json"), filepath.Join(src, "no-amount.json")),
		step("consume", true, "consume", "Q"),
		{name: "consume redelivery", args: []string{"consume", "Q"}, db: true, before: func(t *testing.T, q string) {
			putMessage(t, q, "a-third.json", orderMessage("A", "O1", 1, "1.00"))
		}},
		step("status", true, "status", "Q"),
		step("status --json", true, "status", "Q", "--json"),
		step("show A", true, "show", "Q", "A"),
		step("show A --json", true, "show", "Q", "A", "--json"),
		step("show B --json", true, "show", "Q", "B", "--json"),
		step("show poison.json", true, "show", "Q", "poison.json"),
		step("show poison.json --json", true, "show", "Q", "poison.json", "--json"),
		step("errors", true, "errors", "Q"),
		step("errors --long", true, "errors", "Q", "--long"),
		step("errors --json", true, "errors", "Q", "--json"),
		step("errors --group-by reason", true, "errors", "Q", "--group-by", "reason"),
		step("dups", true, "dups", "Q"),
		step("dups --json", true, "dups", "Q", "--json"),
		step("dups --conflicts", true, "dups", "Q", "--conflicts"),
		step("lag", true, "lag", "Q", "100"),
		step("lag --json", true, "lag", "Q", "100", "--json"),
		step("order-check", true, "order-check", "Q"),
		step("order-check --json", true, "order-check", "Q", "--json"),
		step("fsck", true, "fsck", "Q"),
		step("fsck --json", true, "fsck", "Q", "--json"),
		step("replay poison.json", true, "replay", "Q", "poison.json", "--by", "tester", "--note", "fixed upstream"),
		step("consume replayed", true, "consume", "Q"),
		step("replays", true, "replays", "Q"),
		step("replays --json", true, "replays", "Q", "--json"),
		step("discard --dry-run", true, "discard", "Q", "no-amount.json", "--by", "tester", "--note", "sender gone", "--dry-run"),
		step("discard", true, "discard", "Q", "no-amount.json", "--by", "tester", "--note", "sender gone"),
		step("errors after discard --json", true, "errors", "Q", "--json"),
		step("show no-amount.json --json", true, "show", "Q", "no-amount.json", "--json"),
		step("fsck after", true, "fsck", "Q", "--json"),
		step("prune --dry-run", true, "prune", "Q", "--older-than", "1h", "--dry-run"),
		step("prune", true, "prune", "Q", "--older-than", "1ns"),
		step("status after prune --json", true, "status", "Q", "--json"),
		step("dups after prune", true, "dups", "Q"),
		step("audit", true, "audit", "Q"),
		step("audit --json", true, "audit", "Q", "--json"),
	}
}

// sessionMessages writes the session's messages into src.
func sessionMessages(t *testing.T, src string) {
	t.Helper()
	for name, body := range map[string]string{
		"a.json":         orderMessage("A", "O1", 1, "1.00"),
		"b.json":         orderMessage("B", "O1", 2, "2.50"),
		"c.json":         orderMessage("C", "O1", 4, "4.00"), // seq 3 missing: a gap
		"d.json":         orderMessage("D", "O2", 1, "-7.25"),
		"a-again.json":   orderMessage("A", "O1", 1, "1.00"),  // a redelivery
		"b-other.json":   orderMessage("B", "O1", 2, "25.00"), // same msg_id, other content
		"poison.json":    `{"msg_id":"P","order_no":`,
		"no-amount.json": `{"msg_id":"N","order_no":"O3","seq":1}`,
	} {
		writeFile(t, src, name, body+"\n")
	}
}

// engineRun is what one engine's session printed, step by step.
type engineRun struct {
	engine string
	steps  []result
}

// runSession runs the scripted session on a fresh queue with the ledger
// dsn names ("" for the queue's own SQLite file).
func runSession(t *testing.T, engine, dsn string) engineRun {
	t.Helper()
	base := t.TempDir()
	src, q := filepath.Join(base, "src"), filepath.Join(base, "q")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	sessionMessages(t, src)
	out := engineRun{engine: engine}
	for _, s := range engineSession(src) {
		if s.before != nil {
			s.before(t, q)
		}
		args := make([]string, len(s.args))
		for i, a := range s.args {
			if a == "Q" {
				a = q
			}
			args[i] = a
		}
		if s.db && dsn != "" {
			args = append(args, "--db", dsn)
		}
		r := run(t, args...)
		r.stdout, r.stderr = normaliseSession(r.stdout, q, dsn), normaliseSession(r.stderr, q, dsn)
		out.steps = append(out.steps, r)
	}
	return out
}

var (
	// RFC 3339 times, with or without fractions and zone, and the
	// layouts of the text reports ("2026-12-02 04:30:00").
	sessionTime = regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?( UTC)?`)
	// Ages and durations as the reports print them: "3s ago", "12ms",
	// "1.5µs", "4m0s", and in --json their seconds.
	sessionAge     = regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|us|ms|s|m|h)(\d+(\.\d+)?(ms|s|m))*\b`)
	sessionSeconds = regexp.MustCompile(`("[a-z_]*(seconds|age|elapsed|_s)[a-z_]*"\s*:\s*)-?\d+(\.\d+)?(e[+-]?\d+)?`)
	// The SECS column of spool audit's table: how long an action took.
	sessionSecs = regexp.MustCompile(`(?m)^(\d+ +TIME +\S+ +\S+ +\S+ +\S+ +)\d+\.\d+`)
	// Process ids, as such and in the consumer's name HOST:PID.
	sessionPID = regexp.MustCompile(`("(consumer_)?pid"\s*:\s*)\d+|(HOST:)\d+\b`)
	// A session's name (random-PID@HOST) and a claim's
	// (SESSION:INO:UNIX.NANOS), once the host is normalised.
	sessionName  = regexp.MustCompile(`\b[0-9a-f]{12}-\d+@HOST`)
	sessionClaim = regexp.MustCompile(`SESSION:\d+:\d+(\.\d+)?`)
	// Claim, session and task identifiers: long hex or base32 strings.
	sessionID = regexp.MustCompile(`\b[0-9a-f]{16,}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	// Inode numbers, which differ between two queues of the same files.
	sessionIno = regexp.MustCompile(`("ino"\s*:\s*)\d+|(\bino[ =:]+)\d+|(inode )\d+`)
	// The host's name and a process's pid in session names.
	sessionHost = regexp.MustCompile(regexp.QuoteMeta(hostName()) + `(\.\d+)*`)
	// The padding of a text table's columns, which follows the widths of
	// the values normalised above (a PID of 6 digits on one engine's run
	// and 7 on the other's shifted a column once): compared as one gap.
	sessionGap = regexp.MustCompile(` {2,}`)
	// The in-place writer's hint on a dead letter of a file modified just
	// before its claim: whether a file is still that recent when its
	// engine's consume reads it depends on the machine's load.
	sessionHint = regexp.MustCompile(` \((cut short, and modified less than [^:()]*|it changed after it was read): the file was still being written\? see --min-age\)`)
)

func hostName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "\x00no host"
	}
	return h
}

// normaliseSession replaces in out what must differ between two runs of
// the session on two engines: the queue's path, the DSN (and the --db
// that names it in a command line a hint gives, or consume's record of
// its configuration, which SQLite in the queue does without), times, ages, identifiers, inode numbers and the
// host's name, the padding of table columns, and the in-place writer's
// hint, which depends on how soon each run reads a file. Nothing else.
func normaliseSession(out, q, dsn string) string {
	if dsn != "" {
		out = strings.ReplaceAll(out, dsn, "DSN")
		out = strings.NewReplacer(" --db 'DSN'", "", " --db DSN", "").Replace(out)
		// consume's configuration record names the --db it was given,
		// and where it came from.
		out = strings.NewReplacer(` settings.db="DSN"`, ` settings.db=""`, ` settings.db=DSN`, ` settings.db=""`, " from.db=flag", "").Replace(out)
	}
	out = strings.ReplaceAll(out, q, "QUEUE")
	out = sessionHint.ReplaceAllString(out, "")
	out = sessionTime.ReplaceAllString(out, "TIME")
	out = sessionSeconds.ReplaceAllString(out, "${1}SECONDS")
	out = sessionID.ReplaceAllString(out, "ID")
	out = sessionIno.ReplaceAllString(out, "${1}${2}${3}INO")
	out = sessionHost.ReplaceAllString(out, "HOST")
	out = sessionName.ReplaceAllString(out, "SESSION")
	out = sessionClaim.ReplaceAllString(out, "CLAIM")
	out = sessionPID.ReplaceAllString(out, "${1}${3}PID")
	out = sessionAge.ReplaceAllString(out, "AGE")
	out = sessionSecs.ReplaceAllString(out, "${1}SECS")
	out = sessionGap.ReplaceAllString(out, "  ")
	return out
}

// TestCommandSuiteEngines runs one scripted operator session (init,
// enqueue, consume with duplicates and dead letters, every report in its
// text and --json forms, replay, discard, fsck, prune, audit) against each
// ledger engine, SQLite, PostgreSQL and MariaDB, and requires the same
// output and exit status from every command on every engine, once the
// queue's path, the DSN, times, ages, identifiers, inode numbers and the
// host's name are normalised. A difference fails naming the command.
// PostgreSQL and MariaDB run when their servers are given
// (SPOOL_TEST_POSTGRES, SPOOL_TEST_MYSQL; required on CI).
// ledgerEngine is a ledger backend a test runs the binary against: its
// name, and the --db value of a scratch ledger of its own ("" for SQLite
// in the queue), skipping the test when its server is not given.
type ledgerEngine struct {
	name string
	dsn  func(t *testing.T) string
}

// ledgerEngines are SQLite, PostgreSQL and MariaDB, in that order.
func ledgerEngines() []ledgerEngine {
	return []ledgerEngine{
		{"sqlite", func(*testing.T) string { return "" }},
		{"postgres", func(t *testing.T) string { return ledgertest.Scratch(t, testenv.Postgres(t)) }},
		{"mysql", func(t *testing.T) string {
			return ledgertest.Scratch(t, testenv.Service(t, envMySQL, "mysql://root@127.0.0.1:3306/test"))
		}},
	}
}

func TestCommandSuiteEngines(t *testing.T) {
	t.Parallel()
	if os.Getenv(testenv.PostgresEnv) == "" && os.Getenv(envMySQL) == "" && !testenv.CI() {
		// Before the SQLite session, which would have nothing to be
		// compared with (on CI a missing server fails below instead).
		t.Skip("no PostgreSQL or MariaDB server given (SPOOL_TEST_POSTGRES, SPOOL_TEST_MYSQL): nothing to compare SQLite with")
	}
	engines := ledgerEngines()
	// The engines' sessions run at once, each in a subtest that skips
	// when its server is not given; the comparison waits for them all.
	runs := make([]*engineRun, len(engines))
	t.Run("session", func(t *testing.T) {
		for i, e := range engines {
			t.Run(e.name, func(t *testing.T) {
				t.Parallel()
				r := runSession(t, e.name, e.dsn(t))
				runs[i] = &r
			})
		}
	})
	if runs[0] == nil || t.Failed() {
		t.Fatal("the SQLite session did not finish, or a session failed: nothing to compare")
	}
	if dir := os.Getenv("SPOOL_TEST_SESSION_DUMP"); dir != "" {
		for _, r := range runs {
			if r == nil {
				continue
			}
			var b strings.Builder
			for i, s := range r.steps {
				fmt.Fprintf(&b, "=== %s: exit %d\n%s--- stderr\n%s", engineSession("")[i].name, s.code, s.stdout, s.stderr)
			}
			if err := os.WriteFile(filepath.Join(dir, r.engine+".txt"), []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps := engineSession("")
	base := runs[0]
	compared := 0
	for _, r := range runs[1:] {
		if r == nil {
			continue // skipped: no server given
		}
		compared++
		for i, s := range steps {
			want, got := base.steps[i], r.steps[i]
			if want.code != got.code || want.stdout != got.stdout || want.stderr != got.stderr {
				t.Errorf("spool %s: %s differs from %s:\n%s", s.name, r.engine, base.engine, sessionDiff(want, got))
			}
		}
	}
	if compared == 0 {
		t.Skip("no PostgreSQL or MariaDB server given (SPOOL_TEST_POSTGRES, SPOOL_TEST_MYSQL): nothing to compare SQLite with")
	}
}

// sessionDiff shows how two results of one step differ, line by line.
func sessionDiff(want, got result) string {
	var b strings.Builder
	if want.code != got.code {
		fmt.Fprintf(&b, "exit %d, want %d\n", got.code, want.code)
	}
	for _, part := range []struct{ name, want, got string }{{"stdout", want.stdout, got.stdout}, {"stderr", want.stderr, got.stderr}} {
		wl, gl := strings.Split(part.want, "\n"), strings.Split(part.got, "\n")
		for i := range max(len(wl), len(gl)) {
			var w, g string
			if i < len(wl) {
				w = wl[i]
			}
			if i < len(gl) {
				g = gl[i]
			}
			if w != g {
				fmt.Fprintf(&b, "%s line %d:\n  want %q\n  got  %q\n", part.name, i+1, w, g)
			}
		}
	}
	return b.String()
}

// TestNormaliseSessionHint: the in-place writer's hint goes, in a dead
// letter's detail and in its signature, and nothing else of the line.
func TestNormaliseSessionHint(t *testing.T) {
	for in, want := range map[string]string{
		`"detail": "unexpected end of input at offset 10 (cut short, and modified less than 2s before it was read: the file was still being written? see --min-age)",`:  `"detail": "unexpected end of input at offset 10",`,
		`"signature": "unexpected end of input at offset # (cut short, and modified less than #s before it was read: the file was still being written? see --min-age)"`: `"signature": "unexpected end of input at offset #"`,
		`b.json,parse,missing (it changed after it was read: the file was still being written? see --min-age)`:                                                          `b.json,parse,missing`,
		`a.json,parse,unexpected end (cut short)`: `a.json,parse,unexpected end (cut short)`,
	} {
		if got := normaliseSession(in, "/q", ""); got != want {
			t.Errorf("normaliseSession(%q) = %q, want %q", in, got, want)
		}
	}
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spoolq/spool/internal/sample"
	"github.com/spoolq/spool/ledger"
)

func msg(id, order string, seq int, amount string) string {
	return fmt.Sprintf(`{"msg_id":%q,"order_no":%q,"seq":%d,"amount":%s}`, id, order, seq, amount)
}

func TestFlagsBeforeAndAfterDIR(t *testing.T) {
	q := newQueue(t)
	write(t, filepath.Join(q, "inbox", "a.json"), msg("1", "A", 1, "1.00"))
	out := filepath.Join(t.TempDir(), "schema.csv")
	cli(t, "schema", q, "-o", out).want(t, 0, "")
	cli(t, "schema", "--max-size", "1KiB", q).want(t, 0, "field,type,role\nmsg_id,string,idempotency-key\norder_no,string,order-key\nseq,integer,sequence\namount,number,\n")
	cli(t, "consume", q, "--workers", "2", "--batch=1").want(t, 0, "processed=1 duplicates=0 dead-letters=0 recovered=0\n")
	cli(t, "dups", "-o", filepath.Join(t.TempDir(), "d.txt"), q).want(t, 0, "")
	cli(t, "lag", "--", q, "0").want(t, 0, "inbox=0 processing=0 error=0\n")
	data, err := os.ReadFile(out)
	if err != nil || !strings.HasPrefix(string(data), "field,type,role\nmsg_id,") {
		t.Errorf("-o file: %q, %v", data, err)
	}
}

func TestUsageErrors(t *testing.T) {
	q := newQueue(t)
	for _, tt := range []struct {
		args []string
		cmd  string
		sub  string
	}{
		{[]string{"lag", q, "3", "--bogus"}, "lag", "-bogus"},
		{[]string{"consume", "--nope", q}, "consume", "-nope"},
		{[]string{"consume", q, "--workers", "many"}, "consume", "--workers"},
		{[]string{"consume", q, "--workers", "-1"}, "consume", "--workers"},
		{[]string{"consume", q, "--max-size", "1MB"}, "consume", "1MB"},
		{[]string{"consume", q, "extra"}, "consume", "unexpected argument"},
		{[]string{"consume", q, "--key", "x", "--order-key", "x"}, "consume", "bad contract"},
		{[]string{"schema", q, "--key", ""}, "schema", "bad contract"},
		{[]string{"dups", q, "-o"}, "dups", "-o needs a value"},
		{[]string{"consume", q, "--listen", "127.0.0.1:9464x"}, "consume", `the port "9464x" is not a number`},
		{[]string{"consume", q, "--listen", ":99999"}, "consume", `the port "99999" is not a number`},
		{[]string{"consume", q, "--listen="}, "consume", "--listen is empty"},
		{[]string{"serve", q, "--listen", "localhost"}, "serve", "want host:port"},
		{[]string{"consume", q, "--watch", "--poll", "0"}, "consume", "--poll 0s: want a positive interval"},
		{[]string{"init"}, "init", "missing DIR"},
		{[]string{"consume"}, "consume", "missing DIR"},
		{[]string{"schema"}, "schema", "missing DIR"},
		{[]string{"dups"}, "dups", "missing DIR"},
		{[]string{"errors"}, "errors", "missing DIR"},
		{[]string{"order-check"}, "order-check", "missing DIR"},
		{[]string{"lag"}, "lag", "missing DIR"},
		{[]string{"replay"}, "replay", "missing DIR"},
		{[]string{"replay", q}, "replay", "missing FILE"},
		{[]string{"enqueue"}, "enqueue", "missing DIR"},
		{[]string{"enqueue", q}, "enqueue", "missing FILE"},
		{[]string{"status"}, "status", "missing DIR"},
		{[]string{"status", ""}, "status", "DIR is empty"},
		{[]string{"nosuch", q}, "nosuch", "unknown command (run 'spool help' for the list)"},
		{[]string{"statsu", q}, "statsu", "unknown command (did you mean status?)"},
		{[]string{"Consume", q}, "Consume", "unknown command (did you mean consume?)"},
		{[]string{"help", "replya"}, "help", "replya: unknown command (did you mean replay?)"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cli(t, tt.args...).wantFail(t, 2, tt.cmd, tt.sub)
		})
	}
	r := cli(t)
	if r.code != 2 || !strings.Contains(r.stderr, "Commands:") {
		t.Errorf("no arguments: exit %d, stderr %q; want 2 and the usage", r.code, r.stderr)
	}
}

func TestNotAQueue(t *testing.T) {
	plain := t.TempDir()
	missing := filepath.Join(plain, "missing")
	for _, args := range [][]string{
		{"consume", plain}, {"schema", plain}, {"dups", plain}, {"errors", plain},
		{"order-check", plain}, {"lag", plain, "0"}, {"replay", plain, "a.json"},
		{"enqueue", plain, "a.json"}, {"status", plain}, {"lag", missing, "0"}, {"consume", missing},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			before := listing(t, plain)
			cli(t, args...).wantFail(t, 2, args[0], "not a queue directory")
			if after := listing(t, plain); after != before {
				t.Errorf("%s on a plain directory changed it:\n%s", args[0], after)
			}
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	r := cli(t, "help")
	if r.code != 0 || !strings.Contains(r.stdout, "order-check DIR") || r.stderr != "" {
		t.Errorf("help: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, c := range commands {
		r := cli(t, "help", c.Name)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "Usage: spool "+c.Name) {
			t.Errorf("help %s: exit %d\n%s%s", c.Name, r.code, r.stdout, r.stderr)
		}
		// -h is the short form: the synopsis, the summary, the flags and
		// where the rest is; never longer than the whole help.
		r2 := cli(t, c.Name, "-h")
		if r2.code != 0 || !strings.HasPrefix(r2.stdout, "Usage: spool "+c.Name) ||
			!strings.Contains(r2.stdout, c.Summary) || !strings.Contains(r2.stdout, "spool help "+c.Name) ||
			len(r2.stdout) > len(r.stdout)+100 {
			t.Errorf("%s -h: exit %d\n%s%s", c.Name, r2.code, r2.stdout, r2.stderr)
		}
	}
	r = cli(t, "help", "consume")
	for _, f := range []string{"-watch", "-workers", "-batch", "-db", "-key", "-order-key", "-seq", "-amount", "-require", "-max-size"} {
		if !strings.Contains(r.stdout, f) {
			t.Errorf("help consume lacks %s", f)
		}
	}
	r = cli(t, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "spool ") || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("version: exit %d %q", r.code, r.stdout)
	}
}

func TestInitFrom(t *testing.T) {
	src := t.TempDir()
	write(t, filepath.Join(src, "a.json"), msg("1", "A", 1, "1"))
	write(t, filepath.Join(src, "notes.txt"), "not a message")
	write(t, filepath.Join(src, ".hidden.json"), msg("2", "A", 2, "1"))
	target := filepath.Join(t.TempDir(), "real.json")
	write(t, target, msg("3", "A", 3, "1"))
	if err := os.Symlink(target, filepath.Join(src, "link.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(src, "gone"), filepath.Join(src, "dangling.json")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(src, "pipe.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "dir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	q := filepath.Join(t.TempDir(), "q")
	done := make(chan result, 1)
	go func() { done <- cli(t, "init", q, "--from", src) }()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("init --from blocked (opened the FIFO?)")
	}
	if r.code != 1 || r.stdout != "initialized "+q+"; copied 2 messages from "+src+" into inbox/, skipped 3\n" {
		t.Errorf("exit %d stdout %q", r.code, r.stdout)
	}
	warnings := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(warnings) != 3 {
		t.Fatalf("want 3 warnings, got %q", r.stderr)
	}
	for i, name := range []string{"dangling.json", "dir.json", "pipe.json"} {
		if !strings.HasPrefix(warnings[i], "spool: init: skipped "+filepath.Join(src, name)+": ") {
			t.Errorf("warning %d = %q, want one about %s", i, warnings[i], name)
		}
	}
	if got, want := names(t, filepath.Join(q, "inbox")), []string{"a.json", "link.json"}; !slices.Equal(got, want) {
		t.Errorf("inbox = %v, want %v", got, want)
	}
	if fi, err := os.Lstat(filepath.Join(q, "inbox", "link.json")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("link.json in inbox is not a regular copy: %v %v", fi, err)
	}
	// Again: init is idempotent, and each copy is a new delivery.
	cli(t, "init", q, "--from", filepath.Join(src, "a.json")).wantFail(t, 2, "init", "not a directory")
	only := t.TempDir()
	write(t, filepath.Join(only, "a.json"), msg("1", "A", 1, "1"))
	cli(t, "init", q, "--from", only).want(t, 0, "initialized "+q+"; copied 1 message from "+only+" into inbox/\n")
	if got, want := names(t, filepath.Join(q, "inbox")), []string{"a.json", "a~2.json", "link.json"}; !slices.Equal(got, want) {
		t.Errorf("inbox = %v, want %v", got, want)
	}
}

func TestInitFromMissing(t *testing.T) {
	base := t.TempDir()
	q := filepath.Join(base, "q")
	cli(t, "init", q, "--from", filepath.Join(base, "nope")).wantFail(t, 1, "init", "no such directory")
	if _, err := os.Stat(q); !os.IsNotExist(err) {
		t.Errorf("init with a missing --from created the queue: %v", err)
	}
}

func TestEnqueue(t *testing.T) {
	q := newQueue(t)
	src := t.TempDir()
	write(t, filepath.Join(src, "a.json"), msg("1", "A", 1, "1"))
	write(t, filepath.Join(src, "other", "a.json"), msg("2", "A", 2, "1"))
	write(t, filepath.Join(src, "b.txt"), "x")
	cli(t, "enqueue", q, filepath.Join(src, "a.json")).want(t, 0, "a.json\n")
	cli(t, "enqueue", q, filepath.Join(src, "a.json"), filepath.Join(src, "other", "a.json")).want(t, 0, "a~2.json\na~3.json\n")
	data, err := os.ReadFile(filepath.Join(q, "inbox", "a~3.json"))
	if err != nil || string(data) != msg("2", "A", 2, "1") {
		t.Errorf("a~3.json = %q, %v", data, err)
	}
	before := listing(t, q)
	cli(t, "enqueue", q, filepath.Join(src, "a.json"), filepath.Join(src, "missing.json")).wantFail(t, 1, "enqueue", "missing.json")
	cli(t, "enqueue", q, filepath.Join(src, "a.json"), filepath.Join(src, "b.txt")).wantFail(t, 2, "enqueue", "not a message name")
	if err := os.Mkdir(filepath.Join(src, "d.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	cli(t, "enqueue", q, filepath.Join(src, "a.json"), filepath.Join(src, "d.json")).wantFail(t, 2, "enqueue", "not a regular file")
	if after := listing(t, q); after != before {
		t.Errorf("a refused enqueue changed the queue:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestOrderCheckProblems(t *testing.T) {
	q := newQueue(t)
	in := filepath.Join(q, "inbox")
	write(t, filepath.Join(in, "01.json"), msg("a1", "A", 1, "1"))
	write(t, filepath.Join(in, "02.json"), msg("a3", "A", 3, "1"))
	write(t, filepath.Join(in, "03.json"), msg("a7", "A", 7, "1"))
	write(t, filepath.Join(in, "04.json"), msg("b1", "B", 1, "1"))
	write(t, filepath.Join(in, "05.json"), msg("b1-again", "B", 1, "2"))
	write(t, filepath.Join(in, "06.json"), msg("b2", "B", 2, "1"))
	write(t, filepath.Join(in, "07.json"), msg("c2", "C", 2, "1"))
	write(t, filepath.Join(in, "08.json"), msg("d1", "D", 1, "1"))
	// A redelivery is a duplicate delivery, not an order problem.
	write(t, filepath.Join(in, "09.json"), msg("d1", "D", 1, "1"))
	cli(t, "consume", q).want(t, 0, "processed=8 duplicates=1 dead-letters=0 recovered=0\n")
	want := "order_no,seq,problem\nA,2,missing\nA,4-6,missing\nB,1,duplicate\nC,1,missing\n"
	cli(t, "order-check", q).want(t, 1, want)
	out := filepath.Join(t.TempDir(), "oc.csv")
	r := cli(t, "order-check", q, "-o", out)
	r.want(t, 1, "")
	if r.stderr != "" {
		t.Errorf("order-check with problems wrote to stderr: %q", r.stderr)
	}
	if data, err := os.ReadFile(out); err != nil || string(data) != want {
		t.Errorf("-o file = %q, %v", data, err)
	}
	cli(t, "dups", q).want(t, 0, "d1\n")
}

func TestOrderCheckSQL(t *testing.T) {
	cli(t, "order-check", "--sql").want(t, 0, ledger.OrderCheckSQL)
	cli(t, "order-check", filepath.Join(t.TempDir(), "absent"), "--sql").want(t, 0, ledger.OrderCheckSQL)
	out := filepath.Join(t.TempDir(), "oc.sql")
	cli(t, "order-check", "--sql", "-o", out).want(t, 0, "")
	if data, err := os.ReadFile(out); err != nil || string(data) != ledger.OrderCheckSQL {
		t.Errorf("-o file = %q, %v", data, err)
	}
}

func TestOutputFileIsAtomicAndReplaced(t *testing.T) {
	q := newQueue(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "errors.csv")
	write(t, out, "old content that is longer than the new one\n")
	cli(t, "errors", q, "-o", out).want(t, 0, "")
	data, err := os.ReadFile(out)
	if err != nil || string(data) != "file,reason\n" {
		t.Errorf("-o file = %q, %v", data, err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"errors.csv"}) {
		t.Errorf("temp files left behind: %v", got)
	}
	fi, err := os.Stat(out)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("-o file mode %v, %v; want 0644", fi.Mode(), err)
	}
	cli(t, "errors", q, "-o", filepath.Join(dir, "no", "such", "dir.csv")).wantFail(t, 3, "errors", "no such file")
}

func TestErrorsUnknown(t *testing.T) {
	q := newQueue(t)
	write(t, filepath.Join(q, "error", "by-hand.json"), "{}")
	cli(t, "errors", q).want(t, 0, "file,reason\nby-hand.json,unknown\n")
	cli(t, "errors", q, "--detail").want(t, 0, "file,reason,field,detail\nby-hand.json,unknown,,no dead-letter record in the ledger\n")
}

func TestConfigFile(t *testing.T) {
	q := newQueue(t)
	write(t, filepath.Join(q, "spool.conf"), `{"key_field":"event_id","order_field":"account","seq_field":"n","amount_field":"value"}`)
	in := filepath.Join(q, "inbox")
	write(t, filepath.Join(in, "1.json"), `{"event_id":"e1","account":"X","n":1,"value":"9.99"}`)
	write(t, filepath.Join(in, "2.json"), `{"event_id":"e1","account":"X","n":1,"value":"9.99"}`)
	write(t, filepath.Join(in, "3.json"), `{"event_id":"e2","account":"X","n":2}`)
	write(t, filepath.Join(in, "4.json"), `{"msg_id":"m1","order_no":"X","seq":1,"amount":1}`)
	cli(t, "schema", q).want(t, 0, "field,type,role\nevent_id,string,idempotency-key\naccount,string,order-key\nn,integer,sequence\nvalue,number,\n")
	// Flags override the file: with --require event_id, 3.json is valid.
	cli(t, "schema", q, "--require", "event_id").want(t, 0, "field,type,role\nevent_id,string,idempotency-key\naccount,string,order-key\nn,integer,sequence\nvalue,number,\n")
	cli(t, "schema", q, "--key", "msg_id", "--order-key", "order_no", "--seq", "seq", "--amount", "amount").
		want(t, 0, "field,type,role\nmsg_id,string,idempotency-key\norder_no,string,order-key\nseq,integer,sequence\namount,integer,\n")
	cli(t, "consume", q).want(t, 0, "processed=1 duplicates=1 dead-letters=2 recovered=0\n")
	cli(t, "errors", q, "--detail").want(t, 0, "file,reason,field,detail\n"+
		"3.json,missing-field,value,required field is missing\n"+
		"4.json,missing-field,event_id,required field is missing\n")
	cli(t, "dups", q).want(t, 0, "e1\n")

	// max_size from the file.
	q2 := newQueue(t)
	write(t, filepath.Join(q2, "spool.conf"), `{"max_size": 10}`)
	write(t, filepath.Join(q2, "inbox", "big.json"), msg("1", "A", 1, "1"))
	cli(t, "consume", q2).want(t, 0, "processed=0 duplicates=0 dead-letters=1 recovered=0\n")
	cli(t, "errors", q2).want(t, 0, "file,reason\nbig.json,too-large\n")
}

func TestBadConfigFile(t *testing.T) {
	for _, tt := range []struct{ name, conf, sub string }{
		{"malformed", `{"key_field": "id",`, "spool.conf"},
		{"unknown key", `{"key": "id"}`, `unknown key "key"`},
		{"key in upper case", `{"KEY_FIELD": "id"}`, `unknown key "KEY_FIELD"`},
		{"repeated key", `{"key_field": "msg_id", "key_field": "id"}`, `key "key_field" appears twice`},
		{"empty key", `{"key_field": ""}`, "key_field is empty"},
		{"null key", `{"key_field": null}`, "key_field is null"},
		{"wrong type", `{"max_size": "1MiB"}`, "spool.conf"},
		{"trailing", `{} {}`, "trailing data"},
		{"negative size", `{"max_size": -1}`, "negative"},
		{"clash", `{"key_field": "seq"}`, "bad contract"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := newQueue(t)
			write(t, filepath.Join(q, "spool.conf"), tt.conf)
			write(t, filepath.Join(q, "inbox", "a.json"), msg("1", "A", 1, "1"))
			before := listing(t, q)
			cli(t, "consume", q).wantFail(t, 2, "consume", tt.sub)
			cli(t, "schema", q).wantFail(t, 2, "schema", tt.sub)
			if after := listing(t, q); after != before {
				t.Errorf("a refused consume changed the queue")
			}
		})
	}
}

func TestWatch(t *testing.T) {
	q := newQueue(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	go func() { done <- cliCtx(t, ctx, "consume", q, "--watch") }()
	write(t, filepath.Join(t.TempDir(), "x"), "") // unrelated: the watcher must not care
	src := filepath.Join(t.TempDir(), "w.json")
	write(t, src, msg("w1", "W", 1, "1"))
	cli(t, "enqueue", q, src).want(t, 0, "w.json\n")
	deadline := time.Now().Add(30 * time.Second)
	for len(names(t, filepath.Join(q, "done"))) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not consume w.json within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case r := <-done:
		// The second line counts the rescans, which depend on timing.
		if r.code != 0 || !regexp.MustCompile(`^processed=1 duplicates=0 dead-letters=0 recovered=0\nrescans=\d+ overflows=0\n$`).MatchString(r.stdout) {
			t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("consume --watch did not stop after cancellation")
	}
}

// TestDrainInterrupted: a drain whose context is cancelled (a signal)
// stops gracefully: exit 0 with its summary, nothing left in processing/,
// every message in done/ or still in inbox/.
func TestDrainInterrupted(t *testing.T) {
	q := newQueue(t)
	in := filepath.Join(q, "inbox")
	const n = 3000
	if _, err := sample.Generate(n, sample.Options{Seed: 1}, func(f sample.File) error {
		return os.WriteFile(filepath.Join(in, f.Name), f.Data, 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	go func() { done <- cliCtx(t, ctx, "consume", q, "--batch", "1", "--workers", "1") }()
	deadline := time.Now().Add(30 * time.Second)
	for len(names(t, filepath.Join(q, "done"))) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	r := <-done
	t.Logf("%s", r.stdout)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "processed=") || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "msg=configuration") {
		t.Errorf("interrupted drain: exit %d stdout %q stderr %q; want 0 with a summary and on stderr only the configuration", r.code, r.stdout, r.stderr)
	}
	if n := len(names(t, filepath.Join(q, "processing"))); n != 0 {
		t.Errorf("processing/ holds %d entries after an interrupted drain", n)
	}
	inbox, doneN := len(names(t, in)), len(names(t, filepath.Join(q, "done")))
	if inbox+doneN+len(names(t, filepath.Join(q, "error"))) != n {
		t.Errorf("inbox/ %d, done/ %d: messages lost or duplicated", inbox, doneN)
	}
	if inbox == 0 {
		t.Skip("the drain finished before it could be interrupted")
	}
}

func TestVerbose(t *testing.T) {
	q := newQueue(t)
	for _, f := range sample.Lab() {
		write(t, filepath.Join(q, "inbox", f.Name), string(f.Data))
	}
	r := cli(t, "consume", q, "-v")
	if r.code != 0 || !strings.Contains(r.stderr, "dead letter") || !strings.Contains(r.stderr, "reason=missing-field") {
		t.Errorf("consume -v: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	// Logging is on by default now (issue 17): -v is the same as the
	// default, and --log-level warn is the old silence.
	for _, f := range sample.Lab() {
		write(t, filepath.Join(q, "inbox", f.Name), string(f.Data))
	}
	if r2 := cli(t, "consume", q); r2.code != 0 || !strings.Contains(r2.stderr, "reason=missing-field") {
		t.Errorf("consume without -v: stderr %q, want the dead letters, as with -v", r2.stderr)
	}
	for _, f := range sample.Lab() {
		write(t, filepath.Join(q, "inbox", f.Name), string(f.Data))
	}
	if r3 := cli(t, "consume", q, "--log-level", "warn"); r3.code != 0 || r3.stderr != "" {
		t.Errorf("consume --log-level warn: exit %d, logged %q", r3.code, r3.stderr)
	}
}

func TestReplayCollisionAndDefaultUser(t *testing.T) {
	q := newQueue(t)
	write(t, filepath.Join(q, "inbox", "a.json"), `{"msg_id":"1"}`)
	cli(t, "consume", q).want(t, 0, "processed=0 duplicates=0 dead-letters=1 recovered=0\n")
	write(t, filepath.Join(q, "inbox", "a.json"), "a newer delivery of the same name")
	cli(t, "replay", q, "a.json", "a.json").want(t, 0, "replayed a.json -> inbox/a~2.json\n")
	if got, want := replays(t, q), []string{"a.json>a~2.json by " + osUser() + ": "}; !slices.Equal(got, want) {
		t.Errorf("replays = %v, want %v", got, want)
	}
	// The replayed dead letter is consumed as a new claim.
	cli(t, "consume", q).want(t, 0, "processed=0 duplicates=0 dead-letters=2 recovered=0\n")
	cli(t, "errors", q).want(t, 0, "file,reason\na.json,parse\na~2.json,missing-field\n")
}

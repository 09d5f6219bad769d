package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsageErrorIsOneShortLine: a usage error is its own line and where
// the help is, not the command's whole synopsis.
func TestUsageErrorIsOneShortLine(t *testing.T) {
	r := cli(t, "consume", t.TempDir(), "--poll", "0s")
	want := "spool: consume: --poll 0s: want a positive interval, with --watch. Try: spool help consume\n"
	if r.code != 2 || r.stderr != want {
		t.Fatalf("exit %d stderr %q, want 2 %q", r.code, r.stderr, want)
	}
}

// TestShortHelp: consume -h is the synopsis, the flags and the pointer to
// spool help consume, much shorter than the whole help.
func TestShortHelp(t *testing.T) {
	short, long := cli(t, "consume", "-h"), cli(t, "help", "consume")
	for _, w := range []string{"Usage: spool consume DIR [FLAGS]", "-max-size", "SPOOL_MAX_SIZE", "Run 'spool help consume'"} {
		if !strings.Contains(short.stdout, w) {
			t.Errorf("consume -h lacks %q:\n%s", w, short.stdout)
		}
	}
	if strings.Contains(short.stdout, "Stopping: at SIGINT") {
		t.Errorf("consume -h prints the whole description")
	}
	if !strings.Contains(long.stdout, "Stopping: at SIGINT") {
		t.Errorf("help consume lacks the description")
	}
}

// TestFlagsFromEnvironment: a flag of consume or serve left off the
// command line comes from SPOOL_NAME; the command line wins; a bad value
// is exit 2 naming the variable.
func TestFlagsFromEnvironment(t *testing.T) {
	q := filepath.Join(t.TempDir(), "q")
	if r := cli(t, "init", q); r.code != 0 {
		t.Fatalf("init: %s", r.stderr)
	}
	if err := os.WriteFile(filepath.Join(q, "inbox", "a.json"), []byte(`{"msg_id":"a","order_no":"o","seq":1,"amount":"1","pad":"`+strings.Repeat("x", 200)+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SPOOL_MAX_SIZE", "bogus")
	r := cli(t, "consume", q)
	if r.code != 2 || !strings.Contains(r.stderr, `SPOOL_MAX_SIZE="bogus" (for --max-size)`) {
		t.Fatalf("bad SPOOL_MAX_SIZE: exit %d %q", r.code, r.stderr)
	}
	t.Setenv("SPOOL_MAX_SIZE", "")
	os.Unsetenv("SPOOL_MAX_SIZE")
	t.Setenv("SPOOL_LISTEN", "nohost")
	r = cli(t, "serve", q)
	if r.code != 2 || !strings.Contains(r.stderr, "(set by SPOOL_LISTEN)") {
		t.Fatalf("bad SPOOL_LISTEN: exit %d %q", r.code, r.stderr)
	}
	os.Unsetenv("SPOOL_LISTEN")
	// The flag wins over the variable: 1MiB, the message fits.
	t.Setenv("SPOOL_MAX_SIZE", "100")
	r = cli(t, "consume", q, "--max-size", "1MiB", "--key", "msg_id")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "processed=1 ") {
		t.Fatalf("flag over variable: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	// The variable alone: a second message over 100 bytes is too large.
	if err := os.WriteFile(filepath.Join(q, "inbox", "b.json"), []byte(`{"msg_id":"b","order_no":"o","seq":2,"amount":"1","pad":"`+strings.Repeat("x", 200)+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "consume", q)
	if r.code != 0 || !strings.Contains(r.stdout, "dead-letters=1") {
		t.Fatalf("SPOOL_MAX_SIZE=100: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestHandlerVarsAreNotFlags: a program run by --exec has the message's
// SPOOL_SEQ and SPOOL_AMOUNT in its environment; a spool it runs does not
// take them for --seq and --amount (the contract would name the fields
// "7" and "1.50", and every message would be dead-lettered).
func TestHandlerVarsAreNotFlags(t *testing.T) {
	q := filepath.Join(t.TempDir(), "q")
	if r := cli(t, "init", q); r.code != 0 {
		t.Fatalf("init: %s", r.stderr)
	}
	if err := os.WriteFile(filepath.Join(q, "inbox", "a.json"), []byte(`{"msg_id":"a","order_no":"o","seq":1,"amount":"1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SPOOL_SEQ", "7")
	t.Setenv("SPOOL_AMOUNT", "1.50")
	t.Setenv("SPOOL_MSG_ID", "m7")
	if r := cli(t, "consume", q); r.code != 0 || !strings.HasPrefix(r.stdout, "processed=1 ") {
		t.Fatalf("consume with a handler's variables set: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	r := cli(t, "help", "consume")
	if !strings.Contains(r.stdout, "Not --amount and --seq") {
		t.Errorf("help consume does not say --seq and --amount are not read from the environment:\n%s", r.stdout)
	}
}

// TestCompletion: each shell's script names every command; bash's
// completes a command and its flags when sourced.
func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := cli(t, "completion", sh)
		if r.code != 0 {
			t.Fatalf("completion %s: exit %d %s", sh, r.code, r.stderr)
		}
		for _, c := range commands {
			if !strings.Contains(r.stdout, c.Name) {
				t.Errorf("completion %s lacks %s", sh, c.Name)
			}
		}
	}
	if r := cli(t, "completion", "tcsh"); r.code != 2 {
		t.Errorf("completion tcsh: exit %d, want 2", r.code)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to source the script")
	}
	script := filepath.Join(t.TempDir(), "spool.bash")
	if err := os.WriteFile(script, []byte(cli(t, "completion", "bash").stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bash, "-c", `source "$1"
COMP_WORDS=(spool cons); COMP_CWORD=1; _spool; echo "${COMPREPLY[*]}"
COMP_WORDS=(spool consume --max-s); COMP_CWORD=2; _spool; echo "${COMPREPLY[*]}"`, "x", script).CombinedOutput()
	if err != nil || string(out) != "consume\n--max-size\n" {
		t.Fatalf("bash completion: %v %q", err, out)
	}
}

// TestManPages: spool man writes a page per command from the help text,
// which man(1) can format when it is installed.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	r := cli(t, "man", dir)
	if r.code != 0 {
		t.Fatalf("man: exit %d %s", r.code, r.stderr)
	}
	for _, c := range commands {
		b, err := os.ReadFile(filepath.Join(dir, "spool-"+c.Name+".1"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), ".TH SPOOL") || !strings.Contains(string(b), ".SH DESCRIPTION") {
			t.Errorf("spool-%s.1 is no man page:\n%.200s", c.Name, b)
		}
	}
	page, _ := os.ReadFile(filepath.Join(dir, "spool-consume.1"))
	if !strings.Contains(string(page), `Environment: SPOOL_MAX_SIZE.`) || !strings.Contains(string(page), "Stopping: at SIGINT") {
		t.Errorf("spool-consume.1 lacks the environment or the description")
	}
	if _, err := os.Stat(filepath.Join(dir, "spool.1")); err != nil {
		t.Error(err)
	}
	if r := cli(t, "man", filepath.Join(dir, "missing")); r.code != 2 {
		t.Errorf("man into a missing directory: exit %d, want 2", r.code)
	}
}

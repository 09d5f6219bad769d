package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nobody is the unprivileged user the permission tests run spool as: root
// bypasses file permissions, so a mode-000 message is readable to it.
const nobody = 65534

// TestUnreadableMessage: a message spool may not read (mode 000, EACCES)
// is dead-lettered with the reason unreadable and the errno in its detail,
// not as a parse error, and after a chmod a replay consumes it.
//
// The tests run as root, whom permissions do not bind, so spool runs here
// as the user nobody (SysProcAttr.Credential) on a queue chowned to it;
// the test skips when it cannot switch users.
func TestUnreadableMessage(t *testing.T) {
	t.Parallel()
	as := asNobody(t)
	q := filepath.Join(as.dir, "q")
	as.mustRun(t, 0, "init", q)
	for name, body := range map[string]string{
		"a.json":      `{"msg_id":"m-a","order_no":"O","seq":1,"amount":"1.00"}`,
		"locked.json": `{"msg_id":"m-locked","order_no":"O","seq":2,"amount":"2.00"}`,
		"c.json":      `{"msg_id":"m-c","order_no":"O","seq":3,"amount":"3.00"}`,
	} {
		if err := os.WriteFile(filepath.Join(q, "inbox", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	locked := filepath.Join(q, "inbox", "locked.json")
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	as.chown(t, q)

	r := as.mustRun(t, 0, "consume", q)
	if got, want := parseStats(t, r), (consumeStats{Processed: 2, DeadLetters: 1}); got != want {
		t.Errorf("consume: %+v, want %+v\n%s", got, want, r)
	}
	r = as.mustRun(t, 0, "errors", q, "--detail")
	if want := "file,reason,field,detail\nlocked.json,unreadable,,cannot read: permission denied (EACCES)\n"; r.stdout != want {
		t.Errorf("errors --detail:\n%s\nwant\n%s", r.stdout, want)
	}

	// What the reason tells the operator to do: chmod, then replay.
	if err := os.Chmod(filepath.Join(q, "error", "locked.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	as.mustRun(t, 0, "replay", q, "--reason", "unreadable")
	if got, want := parseStats(t, as.mustRun(t, 0, "consume", q)), (consumeStats{Processed: 1}); got != want {
		t.Errorf("consume after chmod and replay: %+v, want %+v", got, want)
	}
	requireEmpty(t, q, "error")
}

// unprivileged runs spool as the user nobody, in a directory it may use.
type unprivileged struct {
	bin string // a copy of spoolBin that nobody may run
	dir string // a directory owned by nobody
}

// asNobody prepares to run spool as nobody, or skips the test where this
// process cannot switch to that user (not root, or no setuid in this
// sandbox).
func asNobody(t *testing.T) *unprivileged {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run spool as another user whom permissions bind")
	}
	// t.TempDir's directories are 0700, closed to nobody; this one is not.
	base, err := os.MkdirTemp("", "spool-e2e-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	as := &unprivileged{bin: filepath.Join(base, "spool"), dir: filepath.Join(base, "work")}
	if err := copyFile(spoolBin, as.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(as.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	as.chown(t, as.dir)
	out, err := as.command(context.Background(), "version").CombinedOutput()
	if err != nil {
		t.Skipf("cannot run spool as uid %d: %v: %s", nobody, err, out)
	}
	return as
}

func (as *unprivileged) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, as.bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	cmd.Dir = as.dir
	return cmd
}

// mustRun runs spool as nobody and fails the test unless it exits with want.
func (as *unprivileged) mustRun(t testing.TB, want int, args ...string) result {
	t.Helper()
	r := as.run(t, args...)
	if r.code != want {
		t.Fatalf("as nobody, want exit %d, got\n%s", want, r)
	}
	return r
}

// run runs spool as nobody and returns what it did.
func (as *unprivileged) run(t testing.TB, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := as.command(ctx, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{args: args, stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("spool %q as nobody: %v", args, err)
	}
	return r
}

// chown gives everything under root to nobody.
func (as *unprivileged) chown(t testing.TB, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, nobody, nobody)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// copyFile copies from to a new file to, of mode, in a cp process: the
// copy is often a program a test runs next, and a descriptor open for
// writing in this process would be inherited by whatever another test
// forks meanwhile, failing the exec with "text file busy" (ETXTBSY)
// until that child execs in turn.
func copyFile(from, to string, mode os.FileMode) error {
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("copy %s: %w", to, fs.ErrExist)
	}
	if out, err := exec.Command("cp", "--", from, to).CombinedOutput(); err != nil {
		return fmt.Errorf("copy %s: %v: %s", to, err, out)
	}
	return os.Chmod(to, mode)
}

// TestRecoveredDeadLetterNotified: a dead letter recorded by a consumer
// that could not move it into error/ (here error/ is not writable, as a
// consumer killed between the commit and the move would also leave it) is
// moved there by the next run's recovery, and reported as the consumer
// would have reported it: the "dead letter" line with its reason, and
// --on-dead-letter. Without this, it reached error/ unannounced.
func TestRecoveredDeadLetterNotified(t *testing.T) {
	t.Parallel()
	as := asNobody(t)
	q := filepath.Join(as.dir, "q")
	as.mustRun(t, 0, "init", q)
	for name, body := range map[string]string{
		"ok.json":      `{"msg_id":"m-ok","order_no":"O","seq":1,"amount":"1.00"}`,
		"nofield.json": `{"msg_id":"m-nofield"}`,
	} {
		if err := os.WriteFile(filepath.Join(q, "inbox", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	as.chown(t, q)
	errDir := filepath.Join(q, "error")
	if err := os.Chmod(errDir, 0o555); err != nil {
		t.Fatal(err)
	}
	r := as.run(t, "consume", q)
	if r.code != 3 || !strings.Contains(r.stderr, "permission denied") {
		t.Fatalf("consume with error/ not writable: want exit 3, permission denied\n%s", r)
	}
	if names(t, q, errorStage) != nil {
		t.Fatalf("error/ holds %v, want nothing yet", names(t, q, errorStage))
	}
	if err := os.Chmod(errDir, 0o755); err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(as.dir, "notes")
	r = as.mustRun(t, 0, "consume", q,
		"--on-dead-letter", `printf '%s|%s|%s\n' "$SPOOL_FILE" "$SPOOL_REASON" "$SPOOL_DETAIL" >> `+shellQuote(notes))
	if st := parseStats(t, r); st.Recovered == 0 || st.DeadLetters != 0 {
		t.Errorf("next run: %+v, want the claim recovered, no new dead letter\n%s", st, r)
	}
	if !strings.Contains(r.stderr, `msg="dead letter" file=nofield.json stored=nofield.json reason=missing-field`) ||
		!strings.Contains(r.stderr, "recovered=true") {
		t.Errorf("stderr does not report the recovered dead letter with its reason\n%s", r.stderr)
	}
	if got, want := strings.Join(readLines(t, notes), "\n"), "nofield.json|missing-field|required field is missing"; got != want {
		t.Errorf("notifications %q, want %q", got, want)
	}
	if got := names(t, q, errorStage); strings.Join(got, ",") != "nofield.json" {
		t.Errorf("error/ holds %v, want nofield.json", got)
	}
}

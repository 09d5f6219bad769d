package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFailedDrainSummary: a drain that fails after committing batches
// prints what it committed, not what it managed to move. done/ is made
// immutable (chattr +i, which binds root too), so every batch commits and
// then its first move into done/ fails: the run stops with exit 3 and one
// error line, and its summary must match the ledger. Once done/ is
// writable again, the next run recovers those claims, none processed twice.
func TestFailedDrainSummary(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	const n = 300
	for i := range n {
		body := fmt.Sprintf(`{"msg_id":"m-%03d","order_no":"O","seq":%d,"amount":"1.50"}`, i, i+1)
		switch {
		case i%10 == 3:
			body = `{"msg_id":` // a dead letter, which error/ takes
		case i%7 == 5:
			body = fmt.Sprintf(`{"msg_id":"m-%03d","order_no":"O","seq":%d,"amount":"1.50"}`, i-1, i) // a duplicate
		}
		if err := os.WriteFile(filepath.Join(q, "inbox", fmt.Sprintf("%03d.json", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setImmutable(t, filepath.Join(q, "done"), true)

	r := run(t, "consume", q, "--batch", "50")
	if r.code != 3 {
		t.Fatalf("consume into an immutable done/: want exit 3\n%s", r)
	}
	// Log records (a WARN of the claims left for recovery) may come with
	// it; the error itself is one line.
	if lines := notLogged(r.stderr); len(lines) != 1 || !strings.HasPrefix(lines[0], "spool: consume: ") {
		t.Errorf("want one error line on stderr, got %q", r.stderr)
	}
	got := parseStats(t, r)
	db := openLedger(t, q)
	want := consumeStats{
		Processed:   count(t, db, "SELECT COUNT(*) FROM processed"),
		Duplicates:  count(t, db, "SELECT COUNT(*) FROM deliveries WHERE outcome = 'duplicate'"),
		DeadLetters: count(t, db, "SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter'"),
	}
	if want.Processed == 0 {
		t.Fatalf("the failed run committed nothing, so it proves nothing\n%s", r)
	}
	if got != want {
		t.Errorf("the failed run printed %+v, but the ledger holds what it committed: %+v\n%s", got, want, r)
	}
	t.Logf("failed run: %s, ledger %+v", strings.TrimSpace(r.stdout), want)

	setImmutable(t, filepath.Join(q, "done"), false)
	again := parseStats(t, mustRun(t, 0, "consume", q))
	if again.Recovered == 0 {
		t.Errorf("the next run recovered nothing: %+v", again)
	}
	requireEmpty(t, q, "processing")
	if rows := count(t, db, "SELECT COUNT(*) FROM processed"); got.Processed+again.Processed != rows {
		t.Errorf("processed %d then %d, but the ledger holds %d rows", got.Processed, again.Processed, rows)
	}
	if files := countNames(t, q, "done") + countNames(t, q, "error"); files != n {
		t.Errorf("done/ and error/ hold %d files, want %d", files, n)
	}
}

// fsImmutableFL is FS_IMMUTABLE_FL of linux/fs.h, which x/sys/unix does
// not define.
const fsImmutableFL = 0x10

// setImmutable sets or clears a directory's immutable attribute (chattr
// +i), which refuses every change of its entries even to root. It skips
// the test where that cannot be done (no CAP_LINUX_IMMUTABLE, or a
// filesystem without the attribute), and clears the attribute when the
// test ends so that its directory can be removed.
func setImmutable(t *testing.T, dir string, on bool) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err == nil {
		if on {
			flags |= fsImmutableFL
		} else {
			flags &^= fsImmutableFL
		}
		err = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags))
	}
	switch {
	case err == nil:
	case on && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)):
		t.Skipf("cannot make %s immutable (needs root and a filesystem with chattr +i): %v", dir, err)
	default:
		t.Fatalf("chattr %s: %v", dir, err)
	}
	if on {
		t.Cleanup(func() { setImmutable(t, dir, false) })
	}
}

//go:build linux

package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// opsDir is the operations kit, from this package's directory.
const opsDir = "../../examples/ops"

// kitQueue is the queue path the kit's files name.
const kitQueue = "/srv/spool/orders"

// cronJobs reads the commands of the kit's crontab (after the five time
// fields and the user).
func cronJobs(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(opsDir, "spool.cron"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	job := regexp.MustCompile(`^(\S+\s+){5}spool\s+(.+)$`)
	var jobs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") || regexp.MustCompile(`^[A-Z]+=`).MatchString(l) {
			continue
		}
		m := job.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("spool.cron: %q is neither a comment, a variable nor a job run as user spool", l)
		}
		if strings.Contains(m[2], "%") {
			t.Errorf("spool.cron: %q holds a %%, which cron turns into a newline", l)
		}
		jobs = append(jobs, m[2])
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return jobs
}

// runJob runs a cron job on q as cron would (sh -c, spool on PATH) and
// returns what it printed, which cron would mail.
func runJob(t *testing.T, job, q string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", strings.ReplaceAll(job, kitQueue, q))
	cmd.Env = []string{"PATH=" + filepath.Dir(spoolBin) + ":/usr/bin:/bin", "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("job %q: %v\n%s", job, err, out)
	}
	return string(out)
}

// TestCronJobs: each job of examples/ops/spool.cron prints nothing on a
// healthy queue (so cron mails nothing) and says something when its check
// fails: a message waiting too long, dead letters, damage fsck finds, a
// directory that is not a queue.
func TestCronJobs(t *testing.T) {
	t.Parallel()
	jobs := cronJobs(t)
	if len(jobs) != 3 {
		t.Fatalf("spool.cron holds %d jobs, want 3 (lag, errors, fsck)", len(jobs))
	}
	lag, deadLetters, fsck := jobs[0], jobs[1], jobs[2]

	q, _ := workQueue(t)
	putMessage(t, q, "ok.json", orderMessage("1", "O", 1, "1"))
	for _, j := range jobs {
		if out := runJob(t, j, q); out != "" {
			t.Errorf("job %q on a healthy queue printed %q: cron would mail it", j, out)
		}
	}

	setAge(t, q, "ok.json", time.Hour)
	if out := runJob(t, lag, q); !strings.Contains(out, "exit 1") || !strings.Contains(out, "inbox=1 ") {
		t.Errorf("lag job with a message waiting for an hour printed %q, want the exit status and the line", out)
	}
	mustRun(t, 0, "consume", q)
	if out := runJob(t, lag, q); out != "" {
		t.Errorf("lag job once consumed printed %q", out)
	}

	putMessage(t, q, "bad.json", "{")
	putMessage(t, q, "bad2.json", "[]")
	mustRun(t, 0, "consume", q, "--log-level", "error")
	if out := runJob(t, deadLetters, q); !strings.HasPrefix(out, "reason,count,first,last\nparse,2,") {
		t.Errorf("dead-letter job with 2 dead letters printed %q, want them by reason", out)
	}
	if out := runJob(t, fsck, q); out != "" {
		t.Errorf("fsck job on a consistent queue printed %q", out)
	}
	writeFile(t, filepath.Join(q, errorStage), "by-hand.json", "{}")
	if out := runJob(t, fsck, q); !strings.Contains(out, "exit 1") || !strings.Contains(out, "error-unrecorded") {
		t.Errorf("fsck job with a file in error/ that has no record printed %q, want the finding", out)
	}

	notQueue := t.TempDir()
	for _, j := range jobs {
		if out := runJob(t, j, notQueue); !strings.Contains(out, "not a queue") {
			t.Errorf("job %q on a directory that is not a queue printed %q, want the error", j, out)
		}
	}
}

// TestSystemdUnit: the kit's unit has the settings docs/OPERATIONS.md
// relies on, its writable paths hold the queue it consumes, and
// systemd-analyze verify accepts it (skipped where systemd is absent).
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	const name = "spool-consume@.service"
	unit, err := os.ReadFile(filepath.Join(opsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string][]string{}
	for _, l := range strings.Split(string(unit), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			settings[k] = append(settings[k], v)
		}
	}
	for k, want := range map[string]string{
		"Restart": "on-failure", "KillSignal": "SIGTERM", "KillMode": "mixed",
		"ProtectSystem": "strict", "NoNewPrivileges": "yes", "PrivateTmp": "yes", "ProtectHome": "yes",
		"ReadWritePaths": kitQueue,
	} {
		if !slices.Contains(settings[k], want) {
			t.Errorf("%s: %s=%v, want %s", name, k, settings[k], want)
		}
	}
	exec1 := settings["ExecStart"]
	if len(exec1) != 1 || !strings.Contains(exec1[0], " consume "+kitQueue+" ") || !strings.Contains(exec1[0], " --watch") {
		t.Errorf("%s: ExecStart=%v, want spool consume %s --watch", name, exec1, kitQueue)
	}
	if !slices.Equal(settings["Type"], []string{"notify"}) || !slices.Equal(settings["NotifyAccess"], []string{"main"}) {
		t.Errorf("%s: Type=%v NotifyAccess=%v, want notify and main: spool sends READY=1 and STOPPING=1", name, settings["Type"], settings["NotifyAccess"])
	}
	// A stop takes at most --shutdown-timeout and its 10s grace, then 2 x
	// the default --on-dead-letter-timeout (10s) for the notifications
	// still running: systemd must not SIGKILL a consumer that stops as
	// asked.
	shutdown := defaultShutdownTimeout(t)
	if m := regexp.MustCompile(`--shutdown-timeout[ =](\S+)`).FindStringSubmatch(strings.Join(exec1, "")); m != nil {
		if shutdown, err = time.ParseDuration(m[1]); err != nil {
			t.Fatalf("%s: ExecStart=%v: %v", name, exec1, err)
		}
	}
	stop, err := time.ParseDuration(strings.Join(settings["TimeoutStopSec"], ""))
	if want := shutdown + 30*time.Second; err != nil || stop <= want {
		t.Errorf("%s: TimeoutStopSec=%v (%v): want more than the %v a stop may take (--shutdown-timeout %v + 30s)", name, settings["TimeoutStopSec"], err, want, shutdown)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the unit is not verified")
	}
	dir := t.TempDir()
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/spool", spoolBin)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(name, filepath.Join(dir, "spool-consume@1.service")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", "spool-consume@1.service")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", name, err, out)
	}
}

// defaultShutdownTimeout is consume's --shutdown-timeout default, as its
// --help says.
func defaultShutdownTimeout(t *testing.T) time.Duration {
	t.Helper()
	r := mustRun(t, 0, "consume", "--help")
	// The flag's entry: its line, and its description's, to the next flag.
	entry := r.stdout + r.stderr
	if i := strings.Index(entry, "-shutdown-timeout DURATION"); i >= 0 {
		entry = entry[i:]
		if j := strings.Index(entry, "\n  -"); j >= 0 {
			entry = entry[:j]
		}
	}
	m := regexp.MustCompile(`\(default ([^)]+)\)`).FindStringSubmatch(entry)
	if m == nil || !strings.HasPrefix(entry, "-shutdown-timeout DURATION") {
		t.Fatalf("consume --help does not show --shutdown-timeout's default\n%s", r)
	}
	d, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatalf("--shutdown-timeout default %q: %v", m[1], err)
	}
	return d
}

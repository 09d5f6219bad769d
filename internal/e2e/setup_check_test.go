//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A queue in one command, checked in another: init writes spool.conf from
// the contract flags, and check finds nothing wrong and says where each
// value comes from.
func TestInitThenCheck(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	conf := filepath.Join(q, "spool.conf")
	contract := []string{"--key", "event_id", "--order-key", "account", "--require", "event_id,account", "--max-size", "64KiB"}
	r := mustRun(t, 0, append([]string{"init", q}, contract...)...)
	if r.stdout != "initialized "+q+"; wrote "+conf+"\n" || r.stderr != "" {
		t.Fatalf("init with contract flags:\n%s", r)
	}
	var file map[string]any
	data, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatalf("spool.conf is not JSON: %v\n%s", err, data)
	}
	if len(file) != 4 || file["key_field"] != "event_id" || file["order_field"] != "account" || file["max_size"] != 65536.0 {
		t.Errorf("spool.conf holds %v, want the four keys the flags gave", file)
	}
	if fi, err := os.Stat(conf); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("spool.conf mode %v (%v), want 0644: every consumer's user reads it", fi.Mode(), err)
	}

	r = mustRun(t, 0, "check", q)
	if r.stderr != "" {
		t.Errorf("check of a new queue found problems:\n%s", r)
	}
	for _, want := range []string{
		`(?m)^ledger +` + regexp.QuoteMeta(filepath.Join(q, "ledger.db")) + `: answers, schema current, this queue's$`,
		`(?m)^stages +one filesystem, each takes a new file; `,
		`(?m)^  --key +event_id +spool\.conf$`,
		`(?m)^  --require +event_id,account +spool\.conf$`,
		`(?m)^  --max-size +65536 +spool\.conf$`,
		`(?m)^  --seq +seq +default$`,
		`(?m)^  --watch +false +default$`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("check does not print %s\n%s", want, r.stdout)
		}
	}
	// Flags and the environment are consume's, and said to be.
	r = spoolAt{bin: spoolBin, env: []string{"SPOOL_MIN_AGE=5s"}}.mustRun(t, 0, "check", q, "--watch", "--key", "id")
	for _, want := range []string{`(?m)^  --min-age +5s +SPOOL_MIN_AGE$`, `(?m)^  --watch +true +flag$`, `(?m)^  --key +id +flag$`} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("check does not print %s\n%s", want, r.stdout)
		}
	}

	// The same contract again changes nothing; another is refused unless
	// --force, in one line, the file left as it was.
	if r := mustRun(t, 0, append([]string{"init", q}, contract...)...); r.stdout != "initialized "+q+"\n" {
		t.Errorf("init again with the same contract:\n%s", r)
	}
	r = mustRun(t, 2, "init", q, "--key", "other")
	if ls := lines(r.stderr); len(ls) != 1 || !strings.Contains(ls[0], conf+" holds another contract") || !strings.Contains(ls[0], "--force") {
		t.Errorf("init with another contract: want one line saying why and --force\n%s", r)
	}
	if now, _ := os.ReadFile(conf); string(now) != string(data) {
		t.Errorf("a refused init changed spool.conf:\n%s", now)
	}
	mustRun(t, 0, "init", q, "--key", "other", "--force")
	if now, _ := os.ReadFile(conf); string(now) != "{\n  \"key_field\": \"other\"\n}\n" {
		t.Errorf("init --force wrote %q", now)
	}

	// The format is the files' as the contract is theirs: the same
	// format, by another label of its encoding, changes nothing; another
	// is refused as another contract is.
	mustRun(t, 0, "init", q, "--format", "csv", "--encoding", "sjis", "--force")
	data, _ = os.ReadFile(conf)
	if r := mustRun(t, 0, "init", q, "--format", "csv", "--encoding", "shift_jis", "--delimiter", ","); r.stdout != "initialized "+q+"\n" {
		t.Errorf("init again with the same format:\n%s", r)
	}
	for _, other := range [][]string{{"--format", "csv", "--encoding", "latin1"}, {"--format", "xml", "--record", "r", "--encoding", "sjis"}, {"--format", "csv", "--encoding", "sjis", "--include", "*.CSV"}} {
		r = mustRun(t, 2, append([]string{"init", q}, other...)...)
		if ls := lines(r.stderr); len(ls) != 1 || !strings.Contains(ls[0], conf+" holds another") {
			t.Errorf("init %q over another format: want one line saying why\n%s", other, r)
		}
		if now, _ := os.ReadFile(conf); string(now) != string(data) {
			t.Errorf("init %q over another format changed spool.conf:\n%s", other, now)
		}
	}
}

// Each mistake a first setup makes is one line of check, and exit 1.
func TestCheckFindsMistakes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, q string) (env, args []string)
		want  []string
	}{
		{"a misspelt spool.conf key", func(t *testing.T, q string) ([]string, []string) {
			writeFile(t, q, "spool.conf", `{"key_feild": "event_id"}`)
			return nil, nil
		}, []string{`unknown key "key_feild"`, `did you mean "key_field"?`}},
		{"a misspelt variable", func(t *testing.T, q string) ([]string, []string) {
			return []string{"SPOOL_MINAGE=5s"}, nil
		}, []string{"SPOOL_MINAGE is not a setting of spool", "did you mean SPOOL_MIN_AGE"}},
		{"a read-only stage", func(t *testing.T, q string) ([]string, []string) {
			inbox := filepath.Join(q, inbox)
			if out, err := exec.Command("chattr", "+i", inbox).CombinedOutput(); err != nil {
				t.Skipf("chattr +i: %v %s", err, out)
			}
			t.Cleanup(func() { _ = exec.Command("chattr", "-i", inbox).Run() })
			return nil, nil
		}, []string{"stage inbox", "operation not permitted"}},
		{"another queue's ledger", func(t *testing.T, q string) ([]string, []string) {
			other := filepath.Join(t.TempDir(), "other")
			mustRun(t, 0, "init", other)
			return nil, []string{"--db", filepath.Join(other, "ledger.db")}
		}, []string{"belongs to another queue"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			q := filepath.Join(t.TempDir(), "q")
			mustRun(t, 0, "init", q)
			env, args := c.setup(t, q)
			r := spoolAt{bin: spoolBin, env: env}.run(t, append([]string{"check", q}, args...)...)
			ls := lines(r.stderr)
			if r.code != 1 || len(ls) != 1 || !strings.HasPrefix(ls[0], "spool: check: ") {
				t.Fatalf("want exit 1 and one line on stderr\n%s", r)
			}
			for _, w := range c.want {
				if !strings.Contains(ls[0], w) {
					t.Errorf("the line does not say %q: %s", w, ls[0])
				}
			}
			if !strings.Contains(r.stdout, "Service:") {
				t.Errorf("check did not print the configuration\n%s", r)
			}
		})
	}
}

// consume logs the configuration it runs with once, as one JSON record
// under --log-format json: every setting's value, and where each that is
// not a default came from; a misspelt variable is a warning naming the
// real one.
func TestConsumeLogsConfiguration(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q, "--key", "event_id")
	env := []string{"SPOOL_MIN_AGE=1s", "SPOOL_MINAGE=5s", "SPOOL_DB=postgres://spool:s3cret@db.invalid/spool"}
	r := spoolAt{bin: spoolBin, env: env}.run(t, "consume", q, "--log-format", "json", "--exec", "true", "--db", filepath.Join(q, "ledger.db"))
	if r.code != 0 {
		t.Fatalf("consume:\n%s", r)
	}
	type config struct {
		Level, Msg, Queue string
		Settings          map[string]any
		From              map[string]string
	}
	var configs []config
	warned := false
	for _, l := range lines(r.stderr) {
		var rec config
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("stderr line %q is not JSON: %v", l, err)
		}
		switch {
		case rec.Msg == "configuration":
			configs = append(configs, rec)
		case rec.Level == "WARN" && strings.Contains(rec.Msg, "SPOOL_MINAGE") && strings.Contains(rec.Msg, "SPOOL_MIN_AGE"):
			warned = true
		}
	}
	if len(configs) != 1 {
		t.Fatalf("want one configuration record, got %d\n%s", len(configs), r.stderr)
	}
	c := configs[0]
	abs, _ := filepath.Abs(q)
	for key, want := range map[string]any{
		"key": "event_id", "order_key": "order_no", "min_age": 1.0, "exec": "true", "retry_max": 8.0,
		"watch": false, "db": filepath.Join(q, "ledger.db"), "max_size": 1048576.0,
	} {
		if got := c.Settings[key]; got != want {
			t.Errorf("settings.%s = %v (%T), want %v", key, got, got, want)
		}
	}
	for key, want := range map[string]string{"key": "spool.conf", "min_age": "SPOOL_MIN_AGE", "exec": "flag", "db": "flag", "log_format": "flag"} {
		if got := c.From[key]; got != want {
			t.Errorf("from.%s = %q, want %q", key, got, want)
		}
	}
	if _, ok := c.From["retry_max"]; ok || c.Level != "INFO" || c.Queue != abs {
		t.Errorf("record %+v: want level INFO, the queue's path, and no source for a default", c)
	}
	if !warned {
		t.Errorf("no warning about SPOOL_MINAGE naming SPOOL_MIN_AGE\n%s", r.stderr)
	}

	// A password in a URL never reaches the log.
	r = spoolAt{bin: spoolBin, env: []string{"SPOOL_DB=postgres://spool:s3cret@127.0.0.1:1/spool?sslmode=disable&password=s3cret"}}.run(t, "check", q)
	if strings.Contains(r.stdout+r.stderr, "s3cret") || !strings.Contains(r.stdout, "postgres://spool:xxxxx@127.0.0.1:1/spool") {
		t.Errorf("check shows the ledger's password, or not the ledger:\n%s", r)
	}
}

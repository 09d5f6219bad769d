//go:build linux

package e2e

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// errors --detail is an aligned table at a terminal, as the demo shows
// it, and the stable CSV for scripts: to a pipe, to -o, or with --format
// csv at a terminal.
func TestErrorsDetailTableOnTerminal(t *testing.T) {
	t.Parallel()
	q, _ := workQueue(t)
	putMessage(t, q, "bad.json", "{")
	putMessage(t, q, "nofield.json", `{"msg_id":"m1","order_no":"O","seq":1}`)
	mustRun(t, 0, "consume", q)

	_, tty := runTerminal(t, true, "errors", q, "--detail")
	table := strings.ReplaceAll(tty, "\r\n", "\n")
	for _, want := range []string{
		`(?m)^file +reason +detail$`,
		`(?m)^bad\.json +parse +unexpected end of input .* at offset 1\b`,
		`(?m)^nofield\.json +missing-field +amount: required field is missing$`,
	} {
		if !regexp.MustCompile(want).MatchString(table) {
			t.Errorf("errors --detail at a terminal: no line %s\n%s", want, table)
		}
	}
	if ls := lines(table); len(ls) != 3 || strings.Index(ls[1], "parse") != strings.Index(ls[2], "missing-field") {
		t.Errorf("the columns are not aligned:\n%s", table)
	}

	csv := "file,reason,field,detail\n"
	if r := mustRun(t, 0, "errors", q, "--detail"); !strings.HasPrefix(r.stdout, csv) || !strings.Contains(r.stdout, "nofield.json,missing-field,amount,required field is missing\n") {
		t.Errorf("errors --detail to a pipe: want the CSV\n%s", r)
	}
	if _, tty := runTerminal(t, true, "errors", q, "--detail", "--format", "csv"); !strings.HasPrefix(strings.ReplaceAll(tty, "\r\n", "\n"), csv) {
		t.Errorf("errors --detail --format csv at a terminal: want the CSV\n%s", tty)
	}
	out := filepath.Join(t.TempDir(), "errors.csv")
	if _, tty := runTerminal(t, true, "errors", q, "--detail", "-o", out); tty != "" {
		t.Errorf("errors -o wrote %q to the terminal", tty)
	}
	if r := mustRun(t, 0, "errors", q, "--detail", "--format", "table"); !strings.HasPrefix(r.stdout, "file ") {
		t.Errorf("errors --detail --format table to a pipe: want the table\n%s", r)
	}
	if r := run(t, "errors", q, "--json", "--format", "csv"); r.code != 2 || len(lines(r.stderr)) != 1 {
		t.Errorf("--format with --json: want exit 2 and one line\n%s", r)
	}

	// The demo at a terminal shows what the command shows there.
	demo := filepath.Join(t.TempDir(), "demo")
	_, tty = runTerminal(t, true, "demo", demo)
	if !regexp.MustCompile(`(?m)^\$ spool errors \S+ --detail\r?\nfile +reason +detail\r?\n`).MatchString(tty) {
		t.Errorf("the demo at a terminal does not show the table of errors --detail:\n%s", tty)
	}
}

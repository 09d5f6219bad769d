package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/sample"
	"github.com/spoolq/spool/ledger"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// result is what one spool invocation did.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the command line in-process.
func cli(t *testing.T, args ...string) result {
	t.Helper()
	return cliCtx(t, context.Background(), args...)
}

func cliCtx(t *testing.T, ctx context.Context, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(ctx, args, strings.NewReader(""), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// want checks the exit status and stdout of r exactly.
func (r result) want(t *testing.T, code int, stdout string) {
	t.Helper()
	if r.code != code || r.stdout != stdout {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d, stdout:\n%s", r.code, r.stdout, r.stderr, code, stdout)
	}
}

// wantFail checks a failure: the exit status, nothing on stdout, exactly
// one line on stderr in the "spool: CMD: ..." format containing sub.
func (r result) wantFail(t *testing.T, code int, cmd, sub string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d (stderr %q)", r.code, code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout %q, want none", r.stdout)
	}
	checkOneLine(t, r.stderr, cmd, sub)
}

func checkOneLine(t *testing.T, stderr, cmd, sub string) {
	t.Helper()
	if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr is not one line: %q", stderr)
	}
	if !strings.HasPrefix(stderr, "spool: "+cmd+": ") {
		t.Errorf("stderr %q does not start with %q", stderr, "spool: "+cmd+": ")
	}
	if !strings.Contains(stderr, sub) {
		t.Errorf("stderr %q does not mention %q", stderr, sub)
	}
}

// labSource writes the lab sample into a new directory, as a producer's
// outbox would hold it.
func labSource(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	for _, f := range sample.Lab() {
		if err := os.WriteFile(filepath.Join(src, f.Name), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// newQueue runs spool init on a fresh path and returns it.
func newQueue(t *testing.T) string {
	t.Helper()
	q := filepath.Join(t.TempDir(), "q")
	r := cli(t, "init", q)
	r.want(t, 0, "initialized "+q+"\n")
	return q
}

// write puts a file in place, creating its directory.
func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// listing describes everything under dir: each path with its type, size
// and, for regular files, a hash of the content. Two equal listings mean
// nothing was created, moved, removed or changed.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v %d", rel, info.Mode().Type(), info.Size())
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			line += " " + hex.EncodeToString(sum[:8])
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// names lists the entries of a directory, sorted.
func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ns []string
	for _, e := range es {
		ns = append(ns, e.Name())
	}
	return ns
}

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s:\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// refusalState is what a refused replay or discard may change in a queue:
// nothing but its ledger's audit, which records each refusal as a row of
// its own (package task audits every refusal).
type refusalState struct {
	files string // listing of the queue, the ledger's files left out
	audit int    // rows of the audit
}

// refusals snapshots q for requireRefusedOnly.
func refusals(t *testing.T, q string) refusalState {
	t.Helper()
	var s refusalState
	for _, l := range strings.Split(listing(t, q), "\n") {
		if !strings.HasPrefix(l, "ledger.db") {
			s.files += l + "\n"
		}
	}
	withLedger(t, q, func(l *ledger.DB) {
		rows, err := l.Audit().List(context.Background(), ledger.AuditQuery{})
		if err != nil {
			t.Fatal(err)
		}
		s.audit = len(rows)
	})
	return s
}

// requireRefusedOnly fails unless q is as before but for audit rows of
// refusals.
func requireRefusedOnly(t *testing.T, q string, before refusalState) {
	t.Helper()
	after := refusals(t, q)
	if after.files != before.files {
		t.Fatalf("a refused replay or discard changed the queue:\nbefore:\n%s\nafter:\n%s", before.files, after.files)
	}
	withLedger(t, q, func(l *ledger.DB) {
		rows, err := l.Audit().List(context.Background(), ledger.AuditQuery{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows[before.audit:] {
			if r.Outcome != ledger.AuditRefused {
				t.Errorf("a refusal wrote an audit row %s %s %s", r.Action, r.Outcome, r.Detail)
			}
		}
	})
}

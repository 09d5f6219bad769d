package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStrictConfig: a spool.conf that would change the contract without a
// word (a key in another case, a repeated key, "" or null for a value, a
// wrong type) makes spool consume refuse with exit 2 and one line naming
// the key and the file, before it touches the queue or the ledger.
func TestStrictConfig(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	// One message consumed already, so that the ledger exists and a silent
	// change of key would make its redelivery new instead of a duplicate.
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(q, "inbox", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("first.json", `{"msg_id":"m-1","id":"x-1","order_no":"A","seq":1,"amount":"1.00"}`)
	mustRun(t, 0, "consume", q)
	write("again.json", `{"msg_id":"m-1","id":"x-2","order_no":"A","seq":1,"amount":"1.00"}`)

	conf := filepath.Join(q, "spool.conf")
	for _, tt := range []struct{ name, conf, sub string }{
		{"key in upper case", `{"KEY_FIELD":"id"}`, `unknown key "KEY_FIELD": keys are case-sensitive, did you mean "key_field"?`},
		{"repeated key", `{"key_field":"msg_id","key_field":"id"}`, `key "key_field" appears twice`},
		{"empty value", `{"key_field":""}`, `key_field is empty`},
		{"null value", `{"key_field":null}`, `key_field is null`},
		{"unknown key", `{"keyfield":"id"}`, `unknown key "keyfield"`},
		{"size with a unit", `{"max_size":"1MiB"}`, `max_size is a string`},
		{"required as a string", `{"required":"msg_id"}`, `required is a string`},
		{"empty required name", `{"required":[""]}`, `required[0] is empty`},
		{"not an object", `[]`, `want a JSON object`},
		{"trailing data", `{}{}`, `trailing data`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(conf, []byte(tt.conf), 0o644); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, q)
			ledgerBefore := ledgerFiles(t, q)
			r := run(t, "consume", q)
			if r.code != 2 {
				t.Fatalf("want exit 2 (configuration)\n%s", r)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing: no summary of a run that did not start", r.stdout)
			}
			want := fmt.Sprintf("spool: consume: config %s: ", conf)
			if lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n"); len(lines) != 1 ||
				!strings.HasPrefix(lines[0], want) || !strings.Contains(lines[0], tt.sub) {
				t.Errorf("stderr %q: want one line starting %q and saying %q", r.stderr, want, tt.sub)
			}
			if diffs := diffSnapshots(before, snapshot(t, q)); len(diffs) > 0 {
				t.Errorf("the refused consume changed the queue: %s", strings.Join(head(diffs, 10), "; "))
			}
			if after := ledgerFiles(t, q); after != ledgerBefore {
				t.Errorf("the refused consume changed the ledger files:\n%s\nthen\n%s", ledgerBefore, after)
			}
		})
	}

	// The same message with the default contract: a duplicate, as it was
	// all along.
	if err := os.Remove(conf); err != nil {
		t.Fatal(err)
	}
	if got, want := parseStats(t, mustRun(t, 0, "consume", q)), (consumeStats{Duplicates: 1}); got != want {
		t.Errorf("after the config was removed: %+v, want %+v", got, want)
	}
}

// ledgerFiles describes the ledger's files (the database and its
// sidecars), each with its size, mode and content hash.
func ledgerFiles(t testing.TB, q string) string {
	t.Helper()
	var out []string
	for _, name := range []string{"ledger.db", "ledger.db-wal", "ledger.db-shm", "ledger.db-journal"} {
		path := filepath.Join(q, name)
		if _, err := os.Lstat(path); os.IsNotExist(err) {
			continue
		}
		f := statFile(t, path)
		out = append(out, fmt.Sprintf("%s %v %d %s", name, f.Mode, f.Size, f.Hash))
	}
	return strings.Join(out, "\n")
}

package queueopen_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/batch"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
)

// TestParseConfigFormat: spool.conf's format keys sit beside the
// contract's, read as strictly (batch.Format.Set, Check); the other
// format keys without a format, and "key" given as a string, are refused
// with a hint.
func TestParseConfigFormat(t *testing.T) {
	c, err := queueopen.ParseConfig([]byte(`{"key_field": "id", "format": "csv", "encoding": "euc-kr", "include": ["*.csv", "*.csv.gz"], "done_file": "{name}.done", "key": {"hash": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := batch.Format{Kind: batch.CSV, Encoding: "euc-kr", Include: []string{"*.csv", "*.csv.gz"}, DoneFile: "{name}.done", HashKey: true}
	if c.Contract.KeyField != "id" || c.Format.Kind != want.Kind || c.Format.Encoding != want.Encoding ||
		!slices.Equal(c.Format.Include, want.Include) || c.Format.DoneFile != want.DoneFile || !c.Format.HashKey {
		t.Fatalf("ParseConfig = %+v, want key field id and format %+v", c, want)
	}
	for conf, sub := range map[string]string{
		`{"format": "yaml"}`:                    `format "yaml" is unknown`,
		`{"format": "xml"}`:                     `needs "record"`,
		`{"format": null}`:                      "format is null",
		`{"include": ["*.txt"]}`:                "the json format reads one message per *.json file",
		`{"key": "id"}`:                         `did you mean "key_field"?`,
		`{"format": "csv", "Encoding": "x"}`:    `unknown key "Encoding"`,
		`{"format": "csv", "key": {"h": true}}`: `unknown key "h" in key`,
	} {
		_, err := queueopen.ParseConfig([]byte(conf))
		if err == nil || !strings.Contains(err.Error(), sub) || strings.ContainsAny(err.Error(), "\r\n") {
			t.Errorf("ParseConfig(%s) = %v, want one line saying %q", conf, err, sub)
		}
	}
}

// TestBatchNames: a queue of batch files takes, in inbox/, the names its
// format includes once their done-file is there (a replayed dead letter
// needs none), and in the other stages the names it includes; a queue
// of JSON messages is left as it is.
func TestBatchNames(t *testing.T) {
	dir := newQueue(t)
	d, err := queue.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cf, err := queueopen.ParseConfig([]byte(`{"format": "csv", "done_file": "{name}.done"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := queueopen.Batch(d, cf, spool.DefaultContract())
	if err != nil || b == nil || !b.Batched("a.csv") || b.DoneFile("a.csv") != "a.csv.done" {
		t.Fatalf("Batch = %v, %v", b, err)
	}
	for _, n := range []string{"a.csv", "b.csv", "b.csv.done", "c~L7.csv", "d.json", ".e.csv"} {
		if err := os.WriteFile(filepath.Join(dir, "inbox", n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]bool{"a.csv": false, "b.csv": true, "b.csv.done": false, "c~L7.csv": true, "d.json": false, ".e.csv": false} {
		if got := d.IsMessage(queue.Inbox, name); got != want {
			t.Errorf("inbox/%s is a message: %v, want %v", name, got, want)
		}
	}
	if !d.IsMessage(queue.Error, "a~L3.csv") || d.IsMessage(queue.Error, "a.json") {
		t.Error("error/ names: want a~L3.csv a message, a.json not")
	}
	j, err := queue.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if b, err := queueopen.Batch(j, nil, spool.DefaultContract()); b != nil || err != nil || !j.IsMessage(queue.Inbox, "x.json") || j.IsMessage(queue.Inbox, "b.csv") {
		t.Errorf("a JSON queue: Batch = %v, %v, or its names changed", b, err)
	}
}

package queueopen_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/queueopen"
)

// TestOpenReadsConfig: Open reads the queue's spool.conf strictly, for
// every use; Override changes it for one program; a key it does not know
// is a *ConfigError and nothing is left open.
func TestOpenReadsConfig(t *testing.T) {
	ctx := context.Background()
	dir := newQueue(t)
	conf := filepath.Join(dir, queueopen.ConfigName)
	if err := os.WriteFile(conf, []byte(`{"key_field": "event_id", "required": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	q, err := queueopen.Open(ctx, dir, queueopen.Options{Use: queueopen.Write})
	if err != nil {
		t.Fatal(err)
	}
	if q.Contract.KeyField != "event_id" || len(q.Contract.Required) != 0 || q.Config == nil || q.Config.Path != conf {
		t.Errorf("contract %+v, config %+v: want event_id, nothing else required, from %s", q.Contract, q.Config, conf)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	seq := "n"
	q, err = queueopen.Open(ctx, dir, queueopen.Options{Use: queueopen.Read, Override: queueopen.Override{SeqField: &seq}})
	if err != nil {
		t.Fatal(err)
	}
	if q.Contract.KeyField != "event_id" || q.Contract.SeqField != "n" {
		t.Errorf("overridden contract %+v: want event_id from the file, n from the override", q.Contract)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(conf, []byte(`{"Key_field": "event_id"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = queueopen.Open(ctx, dir, queueopen.Options{Use: queueopen.Consume})
	var ce *queueopen.ConfigError
	if !errors.As(err, &ce) || !ce.Invalid || !strings.Contains(err.Error(), `did you mean "key_field"`) {
		t.Fatalf("Open with Key_field: %v; want a *ConfigError naming key_field", err)
	}
	// Nothing was held: a consumer of another contract starts.
	if err := os.Remove(conf); err != nil {
		t.Fatal(err)
	}
	open(t, dir, queueopen.Options{Use: queueopen.Consume})
}

// TestOpenHoldsContract: for Consume, Open holds the contract among the
// live consumers': a second program with another key is refused with a
// *ContractError naming it, one with the same contract joins, and once
// the first has closed, the other key runs.
func TestOpenHoldsContract(t *testing.T) {
	ctx := context.Background()
	dir := newQueue(t)
	first, err := queueopen.Open(ctx, dir, queueopen.Options{Use: queueopen.Consume})
	if err != nil {
		t.Fatal(err)
	}
	key := "event_id"
	other := queueopen.Options{Use: queueopen.Consume, Override: queueopen.Override{KeyField: &key}}
	_, err = queueopen.Open(ctx, dir, other)
	var ce *queueopen.ContractError
	if !errors.As(err, &ce) || len(ce.Diff) == 0 || ce.Diff[0] != `key_field "msg_id" running, "event_id" here` {
		t.Fatalf("another key beside a live consumer: %v; want a *ContractError on key_field", err)
	}
	// Read is not a consumer: it holds nothing and is not refused.
	open(t, dir, queueopen.Options{Use: queueopen.Read, Override: other.Override})
	same, err := queueopen.Open(ctx, dir, queueopen.Options{Use: queueopen.Consume})
	if err != nil {
		t.Fatalf("the same contract beside a live consumer: %v", err)
	}
	for _, q := range []*queueopen.Queue{first, same} {
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	q, err := queueopen.Open(ctx, dir, other)
	if err != nil {
		t.Fatalf("another key once the consumers closed: %v", err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestQueueConsumer: Queue.Consumer runs the queue's contract, and
// refuses a Config.Contract that is another.
func TestQueueConsumer(t *testing.T) {
	dir := newQueue(t)
	if err := os.WriteFile(filepath.Join(dir, queueopen.ConfigName), []byte(`{"key_field": "event_id"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	q := open(t, dir, queueopen.Options{Use: queueopen.Consume})
	h := spool.HandlerFunc(nil)
	if _, err := q.Consumer(spool.Config{Handler: h}); err != nil {
		t.Fatalf("zero contract: %v", err)
	}
	if _, err := q.Consumer(spool.Config{Handler: h, Contract: q.Contract}); err != nil {
		t.Fatalf("the queue's own contract: %v", err)
	}
	_, err := q.Consumer(spool.Config{Handler: h, Contract: spool.DefaultContract()})
	if !errors.Is(err, spool.ErrBadContract) || !strings.Contains(err.Error(), "key_field") {
		t.Fatalf("the default contract on an event_id queue: %v; want ErrBadContract naming key_field", err)
	}
}

// TestOpenHoldsFormat: the format of batch files is held with the
// contract: a consumer started once spool.conf names another format is
// refused while the first runs, naming the formats; a queue of JSON
// messages records its contract alone, as before batch files.
func TestOpenHoldsFormat(t *testing.T) {
	ctx := context.Background()
	dir := newQueue(t)
	conf := filepath.Join(dir, queueopen.ConfigName)
	if err := os.WriteFile(conf, []byte(`{"format": "csv"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	open(t, dir, queueopen.Options{Use: queueopen.Consume})
	if err := os.WriteFile(conf, []byte(`{"format": "jsonl"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := queueopen.Open(ctx, dir, queueopen.Options{Use: queueopen.Consume})
	var ce *queueopen.ContractError
	if !errors.As(err, &ce) || len(ce.Diff) != 1 || ce.Diff[0] != `format {"format":"csv"} running, {"format":"jsonl"} here` {
		t.Fatalf("another format beside a live consumer: %v; want a *ContractError naming the formats", err)
	}
	if err := os.WriteFile(conf, []byte(`{"format": "csv"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	open(t, dir, queueopen.Options{Use: queueopen.Consume}) // the same: joins
	// Another label of the same encoding is the same format.
	for _, label := range []string{"utf-8", "UTF8"} {
		if err := os.WriteFile(conf, []byte(`{"format": "csv", "encoding": "`+label+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		open(t, dir, queueopen.Options{Use: queueopen.Consume})
	}

	plain := newQueue(t)
	open(t, plain, queueopen.Options{Use: queueopen.Consume})
	rec, err := os.ReadFile(filepath.Join(plain, "contract.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(rec), `"format"`) || !strings.HasPrefix(string(rec), `{"hash":"sha256:`) {
		t.Errorf("a JSON queue's record: %s; want the contract alone", rec)
	}
}

package spool

import (
	"context"
	"database/sql"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/spoolq/spool/queue"
)

// TestNewConsumerDefaults: a zero Config gets the documented defaults; in
// particular a pool of DefaultWorkersPerCPU workers per GOMAXPROCS, larger
// than the cores so that a worker waiting on the disk holds nobody up.
func TestNewConsumerDefaults(t *testing.T) {
	for _, workers := range []int{0, -3} {
		c, err := NewConsumer(nil, nil, Config{Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		got := c.cfg
		if want := DefaultWorkersPerCPU * runtime.GOMAXPROCS(0); got.Workers != want {
			t.Errorf("Workers %d: pool of %d, want %d", workers, got.Workers, want)
		}
		if got.BatchSize != DefaultBatchSize || got.BatchBytes != DefaultBatchBytes ||
			got.Lease != queue.DefaultLease || got.PollInterval != DefaultPollInterval {
			t.Errorf("defaults: batch %d, %d bytes, lease %v, poll %v", got.BatchSize, got.BatchBytes, got.Lease, got.PollInterval)
		}
		if got.Contract.KeyField == "" {
			t.Error("no default contract")
		}
	}
	c, err := NewConsumer(nil, nil, Config{Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	if c.cfg.Workers != 3 {
		t.Errorf("Workers 3 became %d", c.cfg.Workers)
	}
}

// TestCallTimeoutBeyondLeaseRefused: a claim must never be taken over by
// another host while its call may still run.
func TestCallTimeoutBeyondLeaseRefused(t *testing.T) {
	for _, tt := range []struct {
		timeout time.Duration
		refused bool
	}{{time.Minute, false}, {2 * time.Minute, true}, {time.Hour, true}} {
		_, err := NewConsumer(nil, callLedgerStub{}, Config{Caller: timedCaller(tt.timeout), Lease: 2 * time.Minute})
		if got := errors.Is(err, ErrTimeoutBeyondLease); got != tt.refused {
			t.Errorf("timeout %v: NewConsumer error %v, want refused=%v", tt.timeout, err, tt.refused)
		}
	}
}

type timedCaller time.Duration

func (timedCaller) Call(context.Context, *Delivery) error { return nil }
func (c timedCaller) CallTimeout() time.Duration          { return time.Duration(c) }

// callLedgerStub is a Ledger that NewConsumer accepts; its methods are
// never called.
type callLedgerStub struct{ Ledger }

// TestRecordChunk: a batch file's plain records go in chunks of
// DefaultRecordBatchSize unless BatchSize is set; with a Handler or a
// Caller, BatchSize's own default; closed early at BatchBytes either way.
func TestRecordChunk(t *testing.T) {
	handler := HandlerFunc(func(context.Context, *sql.Tx, *Delivery) error { return nil })
	for _, tt := range []struct {
		name  string
		cfg   Config
		size  int
		limit int64
	}{
		{"default", Config{}, DefaultRecordBatchSize, DefaultBatchBytes},
		{"batch size set", Config{BatchSize: 50, BatchBytes: 1 << 10}, 50, 1 << 10},
		{"handler", Config{Handler: handler}, DefaultBatchSize, DefaultBatchBytes},
		{"handler, batch size set", Config{Handler: handler, BatchSize: 7, BatchBytes: 1 << 20}, 7, 1 << 20},
		{"caller", Config{Caller: timedCaller(0)}, CallerBatchSize(DefaultConcurrency), DefaultBatchBytes},
	} {
		c, err := NewConsumer(nil, nil, tt.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if size, limit := c.recordChunk(); size != tt.size || limit != tt.limit {
			t.Errorf("%s: recordChunk() = %d, %d; want %d, %d", tt.name, size, limit, tt.size, tt.limit)
		}
	}
}

// TestCutShort: the guess that a dead letter was taken half-written is
// for the start of a JSON object without its end, or nothing at all; a
// file that is no object from its first byte says nothing of the kind.
func TestCutShort(t *testing.T) {
	for data, want := range map[string]bool{
		"":                        true,
		" \n":                     true,
		`{"msg_id":"a","seq":1`:   true,
		"\ufeff{\"msg_id\":":      true,
		"  {\"a\":1,\n":           true,
		`{"msg_id":"a"}`:          false,
		"{\"msg_id\":\"a\"}\r\n":  false,
		"not json":                false,
		`[1,2`:                    false,
		`"a string"`:              false,
		"\ufeffplain text, no {}": false,
	} {
		if got := cutShort([]byte(data)); got != want {
			t.Errorf("cutShort(%q) = %v, want %v", data, got, want)
		}
	}
}

package spool

import (
	"runtime"
	"testing"

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

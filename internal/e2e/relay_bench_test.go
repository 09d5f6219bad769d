//go:build linux

package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/spoolq/spool/internal/testenv"
)

// TestBenchRelay: spool bench --relay measures the relay against each
// broker's official client in one run, NATS, RabbitMQ and Kafka (kfake
// in the test process), over two alternated rounds: a line per target
// and round with both rates, their CPU per event and the ratio, then the
// medians. A target with no client ceiling is a usage error. Needs
// SPOOL_TEST_NATS and SPOOL_TEST_AMQP (required on CI).
func TestBenchRelay(t *testing.T) {
	t.Parallel()
	natsURL := testenv.Service(t, "SPOOL_TEST_NATS", "nats://127.0.0.1:4222")
	amqpURL := testenv.Service(t, "SPOOL_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/")
	topic := uniqueName("bench-")
	broker := kafkaCluster(t, topic)
	stream := uniqueName("BENCH_")
	queue := uniqueName("bench-")
	t.Cleanup(func() {
		if nc, err := nats.Connect(natsURL); err == nil {
			if js, err := jetstream.New(nc); err == nil {
				_ = js.DeleteStream(context.Background(), stream)
			}
			nc.Close()
		}
		if conn, err := amqp.Dial(amqpURL); err == nil {
			if ch, err := conn.Channel(); err == nil {
				_, _ = ch.QueueDelete(queue, false, false, false)
			}
			_ = conn.Close()
		}
	})
	r := mustRun(t, 0, "bench", "--relay", natsURL+"/bench."+stream+"?stream="+stream,
		"--relay", amqpURL+"?queue="+queue, "--relay", "kafka://"+broker+"/"+topic, "--n", "300", "--aggregates", "4", "--rounds", "2")
	line := regexp.MustCompile(`(?m)^(nats|amqp|kafka) +relay +\d+ ev/s cpu +[\d.]+µs/ev +client +\d+ ev/s cpu +[\d.]+µs/ev +relay/client \d+\.\d\d$`)
	if got := len(line.FindAllString(r.stdout, -1)); got != 9 || !strings.Contains(r.stdout, "median of 2 rounds\n") ||
		!strings.HasPrefix(r.stdout, "relay      300 events over 4 aggregates") {
		t.Fatalf("want 3 targets × 2 rounds and their medians (%d lines):\n%s", got, r)
	}
	if r := mustRun(t, 2, "bench", "--relay", "dir:///tmp/x"); !strings.Contains(r.stderr, "want nats://, amqp:// or kafka://") {
		t.Fatalf("a target with no client ceiling:\n%s", r)
	}
}

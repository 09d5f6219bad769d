//go:build linux

package e2e

import (
	"bytes"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/spoolq/spool/internal/testenv"
)

// kafkaCluster starts franz-go's in-process Kafka cluster (kfake: three
// brokers on loopback ports) in the test process, which outlives every
// relay the test kills, with topic made of four partitions, and returns
// one broker's address. No Kafka server can be installed on the test
// machines; what the relay wrote is read back with kcat (librdkafka), a
// client independent of the one the relay uses.
func kafkaCluster(t *testing.T, topic string) string {
	t.Helper()
	if _, err := exec.LookPath("kcat"); err != nil {
		testenv.Missing(t, "kcat is not installed (apt-get install kcat)")
	}
	c, err := kfake.NewCluster(kfake.SeedTopics(4, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

// kafkaRecord is one record as kcat read it.
type kafkaRecord struct {
	partition int
	offset    int64
	key       string
	headers   map[string]string
	env       envelope
}

// kcatRead reads every record of topic with kcat, each partition in
// offset order.
func kcatRead(t *testing.T, broker, topic string) []kafkaRecord {
	t.Helper()
	cmd := exec.Command("kcat", "-b", broker, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
		"-f", `%p\t%o\t%k\t%h\t%s\n`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, stderr.String())
	}
	var recs []kafkaRecord
	for line := range strings.Lines(string(out)) {
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), "\t", 5)
		if len(f) != 5 {
			t.Fatalf("kcat printed %q", line)
		}
		p, err1 := strconv.Atoi(f[0])
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("kcat printed %q", line)
		}
		h := map[string]string{}
		for kv := range strings.SplitSeq(f[3], ",") {
			k, v, _ := strings.Cut(kv, "=")
			h[k] = v
		}
		recs = append(recs, kafkaRecord{p, o, f[2], h, decodeEnvelope(t, []byte(f[4]))})
	}
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].partition != recs[j].partition {
			return recs[i].partition < recs[j].partition
		}
		return recs[i].offset < recs[j].offset
	})
	return recs
}

// TestRelayKafka: relays to a Kafka topic (kfake), killed at random,
// then run to the end: kcat reads every row's event back at least once,
// keyed by its aggregate (so each aggregate in one partition), with its
// event id as the Spool-Event-Id header, and within each aggregate the
// first sight of each event in row order. Kafka keeps what an earlier
// relay sent: the repeats are for the consumer's dedup on Spool-Event-Id.
func TestRelayKafka(t *testing.T) { t.Parallel(); testRelayKafka(t, 1) }

// TestRelayKafkaTwoRelays: the same with two relays at once.
func TestRelayKafkaTwoRelays(t *testing.T) { t.Parallel(); testRelayKafka(t, 2) }

func testRelayKafka(t *testing.T, relays int) {
	topic := uniqueName("spool-test-")
	broker := kafkaCluster(t, topic)
	rng := newRand(t)
	n := testenv.Pick(2000, 300)
	q, id := outboxQueue(t, n, 5)
	relayKills(t, rng, q, "kafka://"+broker+"/"+topic, relays, testenv.Pick(30, 5))

	var got []received
	partitionOf := map[string]int{}
	for _, r := range kcatRead(t, broker, topic) {
		e := r.env
		if r.key != e.Aggregate || r.headers["Spool-Event-Id"] != e.MsgID || r.headers["Spool-Aggregate"] != e.Aggregate || r.headers["Spool-Type"] != "payment" {
			t.Fatalf("record %d/%d: key %q, headers %v; its value: %+v", r.partition, r.offset, r.key, r.headers, e)
		}
		if p, ok := partitionOf[e.Aggregate]; ok && p != r.partition {
			t.Fatalf("aggregate %s in partitions %d and %d", e.Aggregate, p, r.partition)
		}
		partitionOf[e.Aggregate] = r.partition
		got = append(got, received{e.MsgID, e.Aggregate, e.OutboxID})
	}
	repeats := checkReceived(t, q, id, n, got)
	t.Logf("%d records, %d events, %d repeats for the consumer's dedup", len(got), n, repeats)
}

// TestRelayKafkaNoTopic: a topic that does not exist is refused at start
// (exit 2, one line), not left to fail every event.
func TestRelayKafkaNoTopic(t *testing.T) {
	t.Parallel()
	broker := kafkaCluster(t, uniqueName("spool-test-"))
	q, _ := outboxQueue(t, 1, 1)
	r := mustRun(t, 2, "relay", q, "--to", "kafka://"+broker+"/nosuchtopic")
	if !strings.Contains(r.stderr, "topic nosuchtopic does not exist") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("want a one-line refusal naming the topic:\n%s", r)
	}
	if n := pendingRows(t, q); n != 1 {
		t.Fatalf("%d rows pending, want 1", n)
	}
}

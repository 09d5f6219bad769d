//go:build linux

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/spoolq/spool/internal/testenv"
)

// uniqueName is a name no other test run uses: streams and queues on the
// shared servers are the test's own.
func uniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// TestRelayNATS: relays to a JetStream stream (created by the relay),
// killed at random, then run to the end: the stream holds exactly one
// message per row (its duplicate window absorbed every repeat by
// Nats-Msg-Id), each with its event id as Nats-Msg-Id, in row order
// within each aggregate. Needs SPOOL_TEST_NATS (required on CI).
func TestRelayNATS(t *testing.T) { t.Parallel(); testRelayNATS(t, 1) }

// TestRelayNATSTwoRelays: the same with two relays at once.
func TestRelayNATSTwoRelays(t *testing.T) { t.Parallel(); testRelayNATS(t, 2) }

func testRelayNATS(t *testing.T, relays int) {
	server := testenv.Service(t, "SPOOL_TEST_NATS", "nats://127.0.0.1:4222")
	rng := newRand(t)
	n := testenv.Pick(2000, 300)
	q, id := outboxQueue(t, n, 5)
	stream := uniqueName("SPOOLTEST_")
	subject := "spool.test." + stream
	nc, err := nats.Connect(server)
	if err != nil {
		t.Fatalf("connect to %s: %v", server, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	target := "nats://" + u.Host + "/" + subject + "?stream=" + stream
	relayKills(t, rng, q, target, relays, testenv.Pick(30, 5))

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("the relay did not create stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(n) {
		t.Fatalf("stream %s holds %d messages, want %d (one per row)", stream, info.State.Msgs, n)
	}
	var got []received
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		e := decodeEnvelope(t, m.Data)
		if m.Header.Get("Nats-Msg-Id") != e.MsgID || m.Header.Get("Spool-Aggregate") != e.Aggregate || m.Subject != subject {
			t.Fatalf("message %d: subject %s, Nats-Msg-Id %q, Spool-Aggregate %q; its body: %s", seq, m.Subject,
				m.Header.Get("Nats-Msg-Id"), m.Header.Get("Spool-Aggregate"), m.Data)
		}
		got = append(got, received{e.MsgID, e.Aggregate, e.OutboxID})
	}
	if repeats := checkReceived(t, q, id, n, got); repeats != 0 {
		t.Fatalf("the stream stored %d repeats", repeats)
	}
}

// TestRelayAMQP: relays to a RabbitMQ queue (?queue=Q, declared by the
// relay), killed at random, then run to the end: every row's event is in
// the queue at least once, persistent, with its event id as message-id,
// and the distinct message-ids, first seen in row order within each
// aggregate, are the rows. Needs SPOOL_TEST_AMQP (required on CI).
func TestRelayAMQP(t *testing.T) { t.Parallel(); testRelayAMQP(t, 1, false) }

// TestRelayAMQPTwoRelays: the same with two relays at once, publishing
// to an exchange (amq.direct) with a routing key bound to the queue.
func TestRelayAMQPTwoRelays(t *testing.T) { t.Parallel(); testRelayAMQP(t, 2, true) }

func testRelayAMQP(t *testing.T, relays int, viaExchange bool) {
	server := testenv.Service(t, "SPOOL_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/")
	rng := newRand(t)
	n := testenv.Pick(2000, 300)
	q, id := outboxQueue(t, n, 5)
	name := uniqueName("spool-test-")
	conn, err := amqp.Dial(server)
	if err != nil {
		t.Fatalf("connect to the broker: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = ch.QueueDelete(name, false, false, false) })
	target := server + "?queue=" + name
	if viaExchange {
		if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := ch.QueueBind(name, name, "amq.direct", false, nil); err != nil {
			t.Fatal(err)
		}
		target = server + "?exchange=amq.direct&routing_key=" + name
	}
	relayKills(t, rng, q, target, relays, testenv.Pick(30, 5))

	var got []received
	for {
		d, ok, err := ch.Get(name, true)
		if err != nil {
			t.Fatalf("get from %s: %v", name, err)
		}
		if !ok {
			break
		}
		e := decodeEnvelope(t, d.Body)
		if d.MessageId != e.MsgID || d.DeliveryMode != amqp.Persistent || d.Type != "payment" || d.Headers["spool-aggregate"] != e.Aggregate {
			t.Fatalf("message-id %q, delivery mode %d, type %q, headers %v; its body: %s", d.MessageId, d.DeliveryMode, d.Type, d.Headers, d.Body)
		}
		got = append(got, received{e.MsgID, e.Aggregate, e.OutboxID})
	}
	repeats := checkReceived(t, q, id, n, got)
	t.Logf("%d messages, %d events, %d repeats for the consumer's dedup", len(got), n, repeats)
}

// TestRelayAMQPUnroutable: an event no queue takes (an exchange with no
// binding for the key) is returned by the broker, which is a failed
// publish, not an acknowledgement: the row is retried, then parked, and
// never marked published.
func TestRelayAMQPUnroutable(t *testing.T) {
	t.Parallel()
	server := testenv.Service(t, "SPOOL_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/")
	q, _ := outboxQueue(t, 1, 1)
	r := mustRun(t, 0, "relay", q, "--to", server+"?exchange=amq.direct&routing_key="+uniqueName("nobody-"),
		"--max-attempts", "2", "--retry-base", "10ms")
	if want := "published=0 failed=2 parked=1\n"; r.stdout != want {
		t.Fatalf("want %q:\n%s", want, r)
	}
	if n := pendingRows(t, q); n != 1 {
		t.Fatalf("%d rows unpublished, want the returned one", n)
	}
}

// TestRelayPostgresTwoRelays: two relays at once on a PostgreSQL ledger
// (a schema of its own), killed at random, then run to the end into
// another spool queue: the leases keep each aggregate's events in row
// order there too, and the receiving ledger makes each event once.
// Needs SPOOL_TEST_POSTGRES (required on CI).
func TestRelayPostgresTwoRelays(t *testing.T) {
	t.Parallel()
	dsn, admin := postgresServer(t)
	schema := postgresSchema(t, admin)
	db := withSearchPath(t, dsn, schema)
	rng := newRand(t)
	n := testenv.Pick(2000, 300)
	q, _ := workQueue(t)
	mustRun(t, 0, "init", q, "--db", db)
	for i := range n {
		agg := fmt.Sprintf("a%02d", i%5)
		if _, err := admin.Exec(`INSERT INTO `+schema+`.outbox (aggregate, type, payload) VALUES ($1, 'payment', $2)`,
			agg, fmt.Sprintf(`{"agg":%q,"n":%d}`, agg, i/5)); err != nil {
			t.Fatal(err)
		}
	}
	idBytes, err := os.ReadFile(filepath.Join(q, "queue.id"))
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(idBytes))
	pending := func() int {
		var p int
		if err := admin.QueryRow(`SELECT COUNT(*) FROM ` + schema + `.outbox WHERE published_at IS NULL`).Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	b, _ := workQueue(t)
	writeFile(t, b, "spool.conf", `{"required": ["msg_id"]}`)
	relayKillsOn(t, rng, pending, q, "dir://"+b, 2, testenv.Pick(30, 5), "--db", db)

	got := dirReceived(t, b)
	repeats := checkEvents(t, outboxEvents(t, admin, schema+".outbox", id), n, got)
	r := mustRun(t, 0, "consume", b)
	if st := parseStats(t, r); st.Processed != n || st.Duplicates != repeats {
		t.Fatalf("the receiving queue: %+v, want %d processed and %d duplicates", st, n, repeats)
	}
}

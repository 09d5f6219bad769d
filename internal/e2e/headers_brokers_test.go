//go:build linux

package e2e

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/spoolq/spool/internal/testenv"
)

// The trace of the message headersQueue consumes.
const (
	hdrTraceID = "0af7651916cd43dd8448eb211c80319c"
	hdrParent  = "b7ad6b7169203331"
)

// headersQueue is a queue with a headers contract whose one message,
// with a traceparent, tenant and version, was consumed by a --sql
// handler that emitted one event.
func headersQueue(t *testing.T) string {
	t.Helper()
	q, state := workQueue(t)
	writeFile(t, q, "spool.conf", `{"required": ["msg_id"], "headers": {"version": "schema", "trace": "tp", "tenant": "tenant"}}`)
	sqlFile := writeFile(t, state, "outbox.sql", outboxSQL)
	putMessage(t, q, "m.json", `{"msg_id":"m","order_no":"o1","schema":"v7","tp":"00-`+hdrTraceID+`-`+hdrParent+`-00","tenant":"t-9"}`)
	if st := parseStats(t, mustRun(t, 0, "consume", q, "--sql", sqlFile)); st.Processed != 1 {
		t.Fatalf("consume: %+v", st)
	}
	return q
}

// checkTraceHeaders checks the headers an event reached a broker with.
func checkTraceHeaders(t *testing.T, get func(string) string) {
	t.Helper()
	tp := strings.Split(get("traceparent"), "-")
	if len(tp) != 4 || tp[0] != "00" || tp[1] != hdrTraceID || tp[3] != "00" || len(tp[2]) != 16 || tp[2] == hdrParent {
		t.Errorf("traceparent %q: want 00-%s-<a new parent-id>-00", get("traceparent"), hdrTraceID)
	}
	if get("Spool-Tenant") != "t-9" || get("Spool-Schema-Version") != "v7" {
		t.Errorf("Spool-Tenant %q, Spool-Schema-Version %q: want t-9 and v7", get("Spool-Tenant"), get("Spool-Schema-Version"))
	}
}

// TestContractHeadersNATS: the event a message caused reaches JetStream
// with the message's trace continued, its tenant and version as NATS
// headers. Needs SPOOL_TEST_NATS (required on CI).
func TestContractHeadersNATS(t *testing.T) {
	t.Parallel()
	server := testenv.Service(t, "SPOOL_TEST_NATS", "nats://127.0.0.1:4222")
	q := headersQueue(t)
	stream := uniqueName("SPOOLHDR_")
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
	mustRun(t, 0, "relay", q, "--to", "nats://"+u.Host+"/"+subject+"?stream="+stream)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	checkTraceHeaders(t, m.Header.Get)
}

// TestContractHeadersAMQP: the same through RabbitMQ, as AMQP headers.
// Needs SPOOL_TEST_AMQP (required on CI).
func TestContractHeadersAMQP(t *testing.T) {
	t.Parallel()
	server := testenv.Service(t, "SPOOL_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/")
	q := headersQueue(t)
	name := uniqueName("spool-hdr-")
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
	mustRun(t, 0, "relay", q, "--to", server+"?queue="+name)
	d, ok, err := ch.Get(name, true)
	if err != nil || !ok {
		t.Fatalf("get from %s: %v (a message: %v)", name, err, ok)
	}
	checkTraceHeaders(t, func(k string) string { v, _ := d.Headers[k].(string); return v })
}

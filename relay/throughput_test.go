package relay_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/spoolq/spool/internal/testenv"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/relay"
)

// benchEvents is the number of events each iteration of the throughput
// benchmarks publishes; events/s is reported as a metric.
const benchEvents = 2000

func randomName(tb testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// BenchmarkRelayThroughput compares, for the NATS JetStream and RabbitMQ
// targets, the relay draining an outbox of benchEvents rows (over 16
// aggregates, from SQLite) with the broker's own client publishing the
// same number of messages of the same size: one at a time, waiting for
// each acknowledgement as the relay does, and pipelined (256 in flight),
// the way the brokers' own publish benchmarks run. docs/PERFORMANCE.md
// quotes the ratios. Needs SPOOL_TEST_NATS and SPOOL_TEST_AMQP.
func BenchmarkRelayThroughput(b *testing.B) {
	b.Run("nats", func(b *testing.B) {
		server := testenv.Service(b, "SPOOL_TEST_NATS", "nats://127.0.0.1:4222")
		stream := "BENCH_" + randomName(b)
		subject := "bench." + stream
		nc, err := nats.Connect(server)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Storage: jetstream.FileStorage}); err != nil {
			b.Fatal(err)
		}
		defer js.DeleteStream(ctx, stream)
		b.Run("relay", func(b *testing.B) {
			benchRelay(b, server+"/"+subject+"?stream="+stream)
		})
		body := make([]byte, benchBodySize)
		b.Run("own-one-in-flight", func(b *testing.B) {
			events(b, func(id string) error {
				m := nats.NewMsg(subject)
				m.Data = body
				_, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(id))
				return err
			}, nil)
		})
		b.Run("own-pipelined", func(b *testing.B) {
			js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256))
			if err != nil {
				b.Fatal(err)
			}
			events(b, func(id string) error {
				m := nats.NewMsg(subject)
				m.Data = body
				_, err := js.PublishMsgAsync(m, jetstream.WithMsgID(id))
				return err
			}, func() error {
				select {
				case <-js.PublishAsyncComplete():
					return nil
				case <-time.After(time.Minute):
					return fmt.Errorf("acks not all in after a minute")
				}
			})
		})
	})
	b.Run("amqp", func(b *testing.B) {
		server := testenv.Service(b, "SPOOL_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/")
		queue := "bench-" + randomName(b)
		conn, err := amqp.Dial(server)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
			b.Fatal(err)
		}
		defer ch.QueueDelete(queue, false, false, false)
		if err := ch.Confirm(false); err != nil {
			b.Fatal(err)
		}
		u, err := url.Parse(server)
		if err != nil {
			b.Fatal(err)
		}
		u.RawQuery = "queue=" + queue
		b.Run("relay", func(b *testing.B) { benchRelay(b, u.String()) })
		body := make([]byte, benchBodySize)
		publish := func(id string) (*amqp.DeferredConfirmation, error) {
			return ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, true, false,
				amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: id, Body: body})
		}
		b.Run("own-one-in-flight", func(b *testing.B) {
			events(b, func(id string) error {
				dc, err := publish(id)
				if err == nil {
					_, err = dc.WaitContext(context.Background())
				}
				return err
			}, nil)
		})
		b.Run("own-pipelined", func(b *testing.B) {
			var pending []*amqp.DeferredConfirmation
			events(b, func(id string) error {
				dc, err := publish(id)
				if err != nil {
					return err
				}
				pending = append(pending, dc)
				if len(pending) == 256 {
					_, err = pending[0].WaitContext(context.Background())
					pending = pending[1:]
				}
				return err
			}, func() error {
				for _, dc := range pending {
					if _, err := dc.WaitContext(context.Background()); err != nil {
						return err
					}
				}
				pending = pending[:0]
				return nil
			})
		})
	})
}

// benchBodySize is about the size of the relay's JSON document of a
// small event (envelope, aggregate, type, payload).
const benchBodySize = 200

// events runs publish benchEvents times per iteration, then done, and
// reports events/s.
func events(b *testing.B, publish func(id string) error, done func() error) {
	n := 0
	for b.Loop() {
		prefix := randomName(b)
		for i := range benchEvents {
			if err := publish(fmt.Sprintf("%s-%d", prefix, i)); err != nil {
				b.Fatal(err)
			}
		}
		if done != nil {
			if err := done(); err != nil {
				b.Fatal(err)
			}
		}
		n += benchEvents
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

// benchRelay drains a fresh outbox of benchEvents rows to target per
// iteration (the ledger's setup is not timed) and reports events/s.
func benchRelay(b *testing.B, target string) {
	ctx := context.Background()
	n := 0
	for b.Loop() {
		b.StopTimer()
		l, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "ledger.db"))
		if err != nil {
			b.Fatal(err)
		}
		tx, err := l.SQL().Begin()
		if err != nil {
			b.Fatal(err)
		}
		for i := range benchEvents {
			if _, err := tx.Exec(`INSERT INTO outbox (aggregate, type, payload) VALUES (?, 'payment', ?)`,
				fmt.Sprintf("a%d", i%16), fmt.Sprintf(`{"n":%d,"pad":"%0120d"}`, i, i)); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		t, err := relay.Open(ctx, target)
		if err != nil {
			b.Fatal(err)
		}
		r, err := relay.New(l, randomName(b), t, relay.Options{Target: relay.Redact(target)})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		st, err := r.Run(ctx)
		b.StopTimer()
		if err != nil || st.Published != benchEvents {
			b.Fatalf("relay: %+v, %v; want %d published", st, err, benchEvents)
		}
		if err := t.Close(); err != nil {
			b.Fatal(err)
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		n += benchEvents
		b.StartTimer()
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

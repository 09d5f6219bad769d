package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/relay"
)

// RelayOptions choose what spool bench --relay measures.
type RelayOptions struct {
	// Targets are the relay's target URLs (nats://, amqp://, kafka://).
	Targets []string
	// N events over Aggregates aggregates (a00, a01...), round robin.
	N, Aggregates int
	// Rounds of every target, relay and client alternated (the relay
	// first in odd rounds, the client in even ones); 0 means 1.
	Rounds int
	// Parent is where the temporary ledgers go; "" means os.TempDir.
	Parent string
	// CPUProfile, when set, receives a CPU profile of the first relay
	// part (the first round's, of the first target).
	CPUProfile io.Writer
	// BrokerPID, when not 0, is the broker's process on this machine:
	// each part's Run.ServerCPU is its user and system time over the part
	// (/proc/PID/stat), the broker's share of the same cores, which this
	// process's getrusage does not see. One PID for every target: give
	// it with one target at a time.
	BrokerPID int
}

// ClientWindow is the client ceiling's messages in flight: the official
// clients' pipelined publishing, as their own examples run it.
const ClientWindow = 256

// RelayRound is one target's measurement in one round: the relay
// draining an outbox of N events, and the broker's official Go client
// publishing the same N documents with ClientWindow in flight.
type RelayRound struct {
	Target         string
	Relay, Client  Run
	RelayPublished int64 // the relay's count, which must be N
}

// Ratio is the relay's rate as a fraction of the client's.
func (r RelayRound) Ratio() float64 { return r.Relay.Rate() / r.Client.Rate() }

// RelayReport is the outcome of Relay: Rounds[i][j] is round i's
// measurement of target j.
type RelayReport struct {
	Options RelayOptions
	Rounds  [][]RelayRound
}

// Median is the median over the rounds of f of target j.
func (r RelayReport) Median(j int, f func(RelayRound) float64) float64 {
	xs := make([]float64, 0, len(r.Rounds))
	for _, round := range r.Rounds {
		xs = append(xs, f(round[j]))
	}
	slices.Sort(xs)
	if len(xs) == 0 {
		return 0
	}
	m := len(xs) / 2
	if len(xs)%2 == 0 {
		return (xs[m-1] + xs[m]) / 2
	}
	return xs[m]
}

// Relay measures the outbox relay against each target's official client.
// The relay runs in this process, from a SQLite ledger filled beforehand
// (not timed), with its defaults; each part's CPU is this process's user
// and system time over it (getrusage), so the relay's includes reading
// and marking the ledger. Each round uses event ids of its own, so that a
// stream's dedup window never answers for the broker.
func Relay(ctx context.Context, o RelayOptions) (RelayReport, error) {
	if o.Rounds < 1 {
		o.Rounds = 1
	}
	rep := RelayReport{Options: o}
	for round := range o.Rounds {
		var rr []RelayRound
		for _, target := range o.Targets {
			m := RelayRound{Target: relay.Redact(target)}
			docs, err := relayDocs(o)
			if err != nil {
				return rep, err
			}
			parts := []func() error{
				func() (err error) {
					profile := o.CPUProfile
					o.CPUProfile = nil
					srv := brokerCPU(o.BrokerPID)
					m.Relay, m.RelayPublished, err = relayPart(ctx, o, target, profile)
					srv(&m.Relay)
					return err
				},
				func() (err error) {
					srv := brokerCPU(o.BrokerPID)
					m.Client, err = clientPart(ctx, target, docs)
					srv(&m.Client)
					return err
				},
			}
			if round%2 == 1 {
				slices.Reverse(parts)
			}
			for _, part := range parts {
				if err := part(); err != nil {
					return rep, fmt.Errorf("bench --relay %s: %w", relay.Redact(target), err)
				}
			}
			rr = append(rr, m)
		}
		rep.Rounds = append(rep.Rounds, rr)
	}
	return rep, nil
}

// brokerCPU reads process pid's CPU time now, when pid is not 0, and
// returns the function that sets a part's ServerCPU to the time it spent
// since (a broker idle between the parts, its time is the part's own).
// The reading brackets the whole part, setup included, which the
// part's own CPU leaves out: the broker's figure is an upper bound.
func brokerCPU(pid int) func(*Run) {
	t0, ok0 := procCPU(pid)
	return func(r *Run) {
		if t1, ok1 := procCPU(pid); ok0 && ok1 {
			r.ServerCPU, r.ServerSeen = t1-t0, true
		}
	}
}

// procCPU is process pid's user and system time so far, from
// /proc/PID/stat (in USER_HZ ticks, 100 a second on every Linux
// architecture spool builds for); false for pid 0 or when it cannot be
// read.
func procCPU(pid int) (time.Duration, bool) {
	if pid == 0 {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: the fields
	// are counted from its end; utime and stime are the 14th and 15th.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * time.Second / 100, true
}

// doc is one event as the client publishes it: the relay's own document
// for the same row, with an id of this run's own.
type doc struct {
	id, aggregate string
	body          []byte
}

// relayRow is the i-th event's outbox row.
func relayRow(i, aggregates int) ledger.OutboxRow {
	return ledger.OutboxRow{
		ID: int64(i + 1), Aggregate: fmt.Sprintf("a%02d", i%aggregates), Type: "payment",
		Payload: fmt.Appendf(nil, `{"n":%d,"amount":"%d.%02d","pad":"%0100d"}`, i, i, i%100, i), CreatedAt: time.Now(),
	}
}

// relayDocs are the documents of the client part.
func relayDocs(o RelayOptions) ([]doc, error) {
	id := randomID()
	docs := make([]doc, o.N)
	for i := range docs {
		e := relay.Event{ID: relay.EventID(id, int64(i+1)), Row: relayRow(i, o.Aggregates)}
		b, err := e.Body()
		if err != nil {
			return nil, err
		}
		docs[i] = doc{e.ID, e.Row.Aggregate, b}
	}
	return docs, nil
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// relayPart fills a fresh outbox with o.N events and relays it to target.
func relayPart(ctx context.Context, o RelayOptions, target string, profile io.Writer) (Run, int64, error) {
	dir, err := os.MkdirTemp(o.Parent, "spool-bench-relay-")
	if err != nil {
		return Run{}, 0, err
	}
	defer os.RemoveAll(dir)
	l, err := sqlite.Open(ctx, filepath.Join(dir, "ledger.db"))
	if err != nil {
		return Run{}, 0, err
	}
	defer l.Close()
	tx, err := l.SQL().BeginTx(ctx, nil)
	if err != nil {
		return Run{}, 0, err
	}
	for i := range o.N {
		row := relayRow(i, o.Aggregates)
		if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (aggregate, type, payload) VALUES (?, ?, ?)`, row.Aggregate, row.Type, string(row.Payload)); err != nil {
			_ = tx.Rollback()
			return Run{}, 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return Run{}, 0, err
	}
	t, err := relay.Open(ctx, target)
	if err != nil {
		return Run{}, 0, err
	}
	r, err := relay.New(l, randomID(), t, relay.Options{Target: relay.Redact(target)})
	if err != nil {
		_ = t.Close()
		return Run{}, 0, err
	}
	if profile != nil {
		if err := pprof.StartCPUProfile(profile); err != nil {
			return Run{}, 0, err
		}
	}
	cpu0, start := cpuTime(), time.Now()
	st, err := r.Run(ctx)
	run := Run{Name: "relay", N: o.N, Elapsed: time.Since(start), CPU: cpuTime() - cpu0}
	if profile != nil {
		pprof.StopCPUProfile()
	}
	if cerr := t.Close(); err == nil {
		err = cerr
	}
	if err == nil && st.Published != int64(o.N) {
		err = fmt.Errorf("the relay published %d of %d events (%d failures)", st.Published, o.N, st.Failed)
	}
	return run, st.Published, err
}

// clientPart publishes docs to target's broker with its official client,
// ClientWindow in flight, and waits for every acknowledgement.
func clientPart(ctx context.Context, target string, docs []doc) (Run, error) {
	u, err := url.Parse(target)
	if err != nil {
		return Run{}, err
	}
	var c client
	switch u.Scheme {
	case "nats":
		c, err = natsClient(ctx, u)
	case "amqp", "amqps":
		c, err = amqpClient(u)
	case "kafka":
		c, err = kafkaClient(u)
	default:
		return Run{}, fmt.Errorf("no client ceiling for %s: want nats://, amqp:// or kafka://", u.Scheme)
	}
	if err != nil {
		return Run{}, err
	}
	defer c.close()
	cpu0, start := cpuTime(), time.Now()
	err = c.publish(ctx, docs)
	return Run{Name: "client", N: len(docs), Elapsed: time.Since(start), CPU: cpuTime() - cpu0}, err
}

// client is a broker's official client set up as the relay sets its
// own up, publishing a run's documents.
type client struct {
	publish func(ctx context.Context, docs []doc) error
	close   func()
}

// clientStallWait bounds a NATS client's wait for room in its window:
// the relay's own publish timeout.
const clientStallWait = 10 * time.Second

// natsClient publishes with nats.go's asynchronous JetStream publish.
func natsClient(ctx context.Context, u *url.URL) (client, error) {
	subject, stream := strings.TrimPrefix(u.Path, "/"), u.Query().Get("stream")
	server := *u
	server.Path, server.RawQuery = "", ""
	nc, err := nats.Connect(server.String())
	if err != nil {
		return client{}, err
	}
	var failed firstError
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(ClientWindow),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) { failed.set(err) }))
	if err == nil {
		_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Storage: jetstream.FileStorage})
	}
	if err != nil {
		nc.Close()
		return client{}, err
	}
	return client{
		publish: func(ctx context.Context, docs []doc) error {
			for _, d := range docs {
				m := nats.NewMsg(subject)
				m.Data = d.body
				m.Header.Set(jetstream.MsgIDHeader, d.id)
				// Stalled at ClientWindow, it waits for the broker as long
				// as the relay does for an ack (nats.go's default, 200 ms,
				// fails the run on a loaded machine).
				if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(clientStallWait)); err != nil {
					return err
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				return ctx.Err()
			}
			return failed.get()
		},
		close: nc.Close,
	}, nil
}

// amqpClient publishes persistent messages on a channel in confirm mode,
// ClientWindow ahead of their confirms.
func amqpClient(u *url.URL) (client, error) {
	q := u.Query()
	exchange, key := q.Get("exchange"), q.Get("routing_key")
	server := *u
	server.RawQuery = ""
	conn, err := amqp.Dial(server.String())
	if err != nil {
		return client{}, err
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if name := q.Get("queue"); err == nil && name != "" {
		exchange, key = "", name
		_, err = ch.QueueDeclare(name, true, false, false, false, nil)
	}
	if err != nil {
		_ = conn.Close()
		return client{}, err
	}
	return client{
		publish: func(ctx context.Context, docs []doc) error {
			var pending []*amqp.DeferredConfirmation
			wait := func(dc *amqp.DeferredConfirmation) error {
				ok, err := dc.WaitContext(ctx)
				if err == nil && !ok {
					err = errors.New("nacked")
				}
				return err
			}
			for _, d := range docs {
				dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, amqp.Publishing{
					DeliveryMode: amqp.Persistent, MessageId: d.id, ContentType: "application/json", Body: d.body,
				})
				if err != nil {
					return err
				}
				if pending = append(pending, dc); len(pending) == ClientWindow {
					if err := wait(pending[0]); err != nil {
						return err
					}
					pending = pending[1:]
				}
			}
			for _, dc := range pending {
				if err := wait(dc); err != nil {
					return err
				}
			}
			return nil
		},
		close: func() { _ = conn.Close() },
	}, nil
}

// kafkaClient produces through franz-go's idempotent producer, acks from
// all in-sync replicas, ClientWindow records buffered, keyed by aggregate.
func kafkaClient(u *url.URL) (client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(u.Host), kgo.DefaultProduceTopic(strings.TrimPrefix(u.Path, "/")),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(ClientWindow))
	if err != nil {
		return client{}, err
	}
	return client{
		publish: func(ctx context.Context, docs []doc) error {
			var failed firstError
			for _, d := range docs {
				cl.Produce(ctx, &kgo.Record{Key: []byte(d.aggregate), Value: d.body,
					Headers: []kgo.RecordHeader{{Key: "Spool-Event-Id", Value: []byte(d.id)}}},
					func(_ *kgo.Record, err error) { failed.set(err) })
			}
			if err := cl.Flush(ctx); err != nil {
				return err
			}
			return failed.get()
		},
		close: cl.Close,
	}, nil
}

// firstError keeps the first error set, from any goroutine.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

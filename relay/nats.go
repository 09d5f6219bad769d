package relay

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spoolq/spool"
)

// NATS is the nats://HOST:PORT/SUBJECT?stream=NAME target: a JetStream
// publish of each event's JSON document (Event.Body) to SUBJECT, with the
// event's id as its Nats-Msg-Id, waiting for the stream's ack. The stream
// drops a repeat within its duplicate window (2 minutes by default) and
// acks it as a duplicate; a repeat later than that is stored again, and
// the consumer's dedup on Nats-Msg-Id is what absorbs it. The event's
// headers travel as NATS headers, with Spool-Aggregate and Spool-Type.
//
// When the stream does not exist, it is created over SUBJECT (file
// storage, the server's defaults otherwise).
//
// It is a Pipeline: events are published asynchronously on the one
// connection, up to Window awaiting their acks, which the server sends in
// publish order; a publish the stream does not answer within
// publishTimeout fails. The client's own resend on "no responders" is
// off, since a resend would pass the events sent after it.
type NATS struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	subject string
	pubOpts []jetstream.PublishOpt

	mu      sync.Mutex
	pending map[*nats.Msg]func(error)
}

// natsWindow is the NATS target's Window: the publishes awaiting their
// acks, as nats.go's own examples of asynchronous publishing keep.
const natsWindow = 256

// OpenNATS connects to the server of u and makes sure its stream exists.
func OpenNATS(ctx context.Context, u *url.URL) (*NATS, error) {
	subject := strings.TrimPrefix(u.Path, "/")
	stream := u.Query().Get("stream")
	if subject == "" || stream == "" {
		return nil, fmt.Errorf("target %s: want nats://HOST:PORT/SUBJECT?stream=NAME", u.Redacted())
	}
	server := *u
	server.Path, server.RawQuery = "", ""
	nc, err := nats.Connect(server.String(), append(natsLogging(), nats.Name("spool relay"), nats.MaxReconnects(-1))...)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", u.Redacted(), err)
	}
	t := &NATS{nc: nc, subject: subject, pending: map[*nats.Msg]func(error){},
		pubOpts: []jetstream.PublishOpt{jetstream.WithRetryAttempts(0)}}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(natsWindow),
		jetstream.WithPublishAsyncTimeout(publishTimeout),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) { t.resolve(m, nil) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) { t.resolve(m, natsError(err)) }))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("target %s: %w", u.Redacted(), err)
	}
	if _, err := js.Stream(ctx, stream); errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Storage: jetstream.FileStorage})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			err = nil // another relay made it first
		}
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("target %s: create stream %s: %w", u.Redacted(), stream, err)
		}
	} else if err != nil {
		nc.Close()
		return nil, fmt.Errorf("target %s: stream %s: %w", u.Redacted(), stream, err)
	}
	t.js = js
	return t, nil
}

// publishTimeout bounds the wait for one ack.
const publishTimeout = 10 * time.Second

// Window is the most publishes awaiting their acks.
func (t *NATS) Window() int { return natsWindow }

// Send publishes e asynchronously; done gets the stream's ack or error.
func (t *NATS) Send(_ context.Context, e *Event, done func(error)) {
	body, err := e.Body()
	if err != nil {
		done(spool.Permanent(err))
		return
	}
	m := nats.NewMsg(t.subject)
	m.Data = body
	for k, v := range e.Headers() {
		m.Header.Set(k, v)
	}
	m.Header.Set("Spool-Aggregate", e.Row.Aggregate)
	m.Header.Set("Spool-Type", e.Row.Type)
	m.Header.Set(jetstream.MsgIDHeader, e.ID)
	// Registered before the publish: its ack may come before
	// PublishMsgAsync returns.
	t.mu.Lock()
	t.pending[m] = done
	t.mu.Unlock()
	if _, err := t.js.PublishMsgAsync(m, t.pubOpts...); err != nil {
		t.resolve(m, natsError(err))
	}
}

// resolve calls the done of m's Send, once.
func (t *NATS) resolve(m *nats.Msg, err error) {
	t.mu.Lock()
	done := t.pending[m]
	delete(t.pending, m)
	t.mu.Unlock()
	if done != nil {
		done(err)
	}
}

// natsError marks a message over the server's limit permanent.
func natsError(err error) error {
	if errors.Is(err, nats.ErrMaxPayload) {
		return spool.Permanent(fmt.Errorf("nats: %w", err))
	}
	return fmt.Errorf("nats: %w", err)
}

// Publish sends e and waits for the stream's ack.
func (t *NATS) Publish(ctx context.Context, e *Event) error {
	return publishOne(ctx, t, e)
}

// Close closes the connection; the relay has waited for every ack.
func (t *NATS) Close() error {
	t.nc.Close()
	return nil
}

// publishOne is Publish through a Pipeline's Send.
func publishOne(ctx context.Context, p Pipeline, e *Event) error {
	res := make(chan error, 1)
	p.Send(ctx, e, func(err error) { res <- err })
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

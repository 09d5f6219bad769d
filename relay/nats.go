package relay

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
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
type NATS struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	subject string
}

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
	js, err := jetstream.New(nc)
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
	return &NATS{nc: nc, js: js, subject: subject}, nil
}

// publishTimeout bounds the wait for one ack.
const publishTimeout = 10 * time.Second

// Publish sends e and waits for the stream's ack.
func (t *NATS) Publish(ctx context.Context, e *Event) error {
	body, err := e.Body()
	if err != nil {
		return spool.Permanent(err)
	}
	m := nats.NewMsg(t.subject)
	m.Data = body
	for k, v := range e.Headers() {
		m.Header.Set(k, v)
	}
	m.Header.Set("Spool-Aggregate", e.Row.Aggregate)
	m.Header.Set("Spool-Type", e.Row.Type)
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	if _, err := t.js.PublishMsg(ctx, m, jetstream.WithMsgID(e.ID)); err != nil {
		if errors.Is(err, nats.ErrMaxPayload) {
			return spool.Permanent(fmt.Errorf("nats: %w", err))
		}
		return fmt.Errorf("nats: %w", err)
	}
	return nil
}

// Close drains nothing (every publish waited for its ack) and closes the
// connection.
func (t *NATS) Close() error {
	t.nc.Close()
	return nil
}

package relay

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/spoolq/spool"
)

// AMQP is the amqp://USER:PASS@HOST:PORT/VHOST?exchange=X&routing_key=K
// (or ?queue=Q) target: each event's JSON document (Event.Body) published
// persistent (delivery mode 2), mandatory, with the event's id as its
// message-id and its type as its type, on a channel in confirm mode: the
// broker's ack is the acknowledgement, a nack or a return (no queue bound
// to take it) a transient failure. With ?queue=Q the queue is declared
// durable and the event published to it through the default exchange.
// RabbitMQ does not dedup: a repeat is delivered again, and the consumer
// dedups on message-id. The event's headers travel as AMQP headers, with
// spool-aggregate.
type AMQP struct {
	url, redacted string
	exchange, key string
	queue         string
	conn          *amqp.Connection
	ch            *amqp.Channel
	returns       chan amqp.Return
}

// OpenAMQP connects to the broker of u.
func OpenAMQP(_ context.Context, u *url.URL) (*AMQP, error) {
	q := u.Query()
	t := &AMQP{redacted: u.Redacted(), exchange: q.Get("exchange"), key: q.Get("routing_key"), queue: q.Get("queue")}
	switch {
	case t.queue != "" && (t.exchange != "" || t.key != ""):
		return nil, fmt.Errorf("target %s: want ?exchange=X&routing_key=K or ?queue=Q, not both", t.redacted)
	case t.queue == "" && t.exchange == "":
		return nil, fmt.Errorf("target %s: want ?exchange=X&routing_key=K or ?queue=Q", t.redacted)
	}
	server := *u
	server.RawQuery = ""
	t.url = server.String()
	if err := t.connect(); err != nil {
		return nil, err
	}
	return t, nil
}

// connect opens the connection and a channel in confirm mode.
func (t *AMQP) connect() error {
	conn, err := amqp.Dial(t.url)
	if err != nil {
		return fmt.Errorf("amqp %s: %w", t.redacted, err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err == nil && t.queue != "" {
		_, err = ch.QueueDeclare(t.queue, true, false, false, false, nil)
	}
	if err != nil {
		_ = conn.Close() // the error that matters is the channel's
		return fmt.Errorf("amqp %s: %w", t.redacted, err)
	}
	t.conn, t.ch = conn, ch
	t.returns = ch.NotifyReturn(make(chan amqp.Return, 1))
	return nil
}

// Publish sends e and waits for the broker's confirm.
func (t *AMQP) Publish(ctx context.Context, e *Event) error {
	if t.ch == nil || t.ch.IsClosed() {
		t.drop()
		if err := t.connect(); err != nil {
			return err
		}
	}
	body, err := e.Body()
	if err != nil {
		return spool.Permanent(err)
	}
	headers := amqp.Table{"spool-aggregate": e.Row.Aggregate}
	for k, v := range e.Headers() {
		headers[k] = v
	}
	exchange, key := t.exchange, t.key
	if t.queue != "" {
		exchange, key = "", t.queue
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	dc, err := t.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, amqp.Publishing{
		DeliveryMode: amqp.Persistent, MessageId: e.ID, Type: e.Row.Type,
		ContentType: "application/json", Timestamp: e.Row.CreatedAt, Headers: headers, Body: body,
	})
	if err != nil {
		t.drop()
		return fmt.Errorf("amqp: %w", err)
	}
	acked, err := dc.WaitContext(ctx)
	if err != nil {
		t.drop()
		return fmt.Errorf("amqp: waiting for the confirm: %w", err)
	}
	// A return comes before the confirm of its message.
	select {
	case r := <-t.returns:
		return fmt.Errorf("amqp: returned by the broker: %d %s (no queue took it)", r.ReplyCode, r.ReplyText)
	default:
	}
	if !acked {
		return errors.New("amqp: the broker nacked it")
	}
	return nil
}

// drop closes a connection after a failure, so that the next publish
// opens a new one.
func (t *AMQP) drop() {
	if t.conn != nil {
		_ = t.conn.Close() // it failed already
	}
	t.conn, t.ch = nil, nil
}

// Close closes the connection.
func (t *AMQP) Close() error {
	if t.conn == nil {
		return nil
	}
	err := t.conn.Close()
	t.conn, t.ch = nil, nil
	if errors.Is(err, amqp.ErrClosed) {
		return nil
	}
	return err
}

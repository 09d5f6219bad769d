package relay

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

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
//
// It is a Pipeline: up to Window messages are published on the one
// channel ahead of their confirms, which RabbitMQ sends in publish order
// and a waiter goroutine takes in that order.
type AMQP struct {
	url, redacted string
	exchange, key string
	queue         string
	conn          *amqp.Connection
	ch            *amqp.Channel
	// waits feeds the waiter (await) of the channel ch, in publish order.
	waits chan confirmWait
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
	// Room for a return of every message in flight: the connection's
	// reader never waits on it before handing over the next confirm.
	returns := ch.NotifyReturn(make(chan amqp.Return, amqpWindow+1))
	t.waits = make(chan confirmWait, amqpWindow+1)
	go t.await(conn, t.waits, returns)
	return nil
}

// amqpWindow is the AMQP target's Window: messages published on the
// channel whose confirms have not come yet.
const amqpWindow = 256

// Window is the most messages awaiting their confirms.
func (t *AMQP) Window() int { return amqpWindow }

// confirmWait is a published message whose confirm the waiter of its
// channel waits for, in publish order.
type confirmWait struct {
	dc   *amqp.DeferredConfirmation
	id   string
	sent time.Time
	done func(error)
}

// Send publishes e on the channel in confirm mode; done gets the broker's
// confirm (a nack or a return is a failure). A failure to publish, or a
// confirm that does not come within publishTimeout, closes the
// connection, which nacks every message still waiting on it; the next
// Send opens a new one.
func (t *AMQP) Send(ctx context.Context, e *Event, done func(error)) {
	if t.ch == nil || t.ch.IsClosed() {
		t.drop()
		if err := t.connect(); err != nil {
			done(err)
			return
		}
	}
	body, err := e.Body()
	if err != nil {
		done(spool.Permanent(err))
		return
	}
	headers := amqp.Table{"spool-aggregate": e.Row.Aggregate}
	for k, v := range e.Headers() {
		headers[k] = v
	}
	exchange, key := t.exchange, t.key
	if t.queue != "" {
		exchange, key = "", t.queue
	}
	dc, err := t.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, amqp.Publishing{
		DeliveryMode: amqp.Persistent, MessageId: e.ID, Type: e.Row.Type,
		ContentType: "application/json", Timestamp: e.Row.CreatedAt, Headers: headers, Body: body,
	})
	if err != nil {
		t.drop()
		done(fmt.Errorf("amqp: %w", err))
		return
	}
	t.waits <- confirmWait{dc: dc, id: e.ID, sent: time.Now(), done: done}
}

// await is the waiter of one channel: it takes the confirms in publish
// order, which is the order the broker sends them in, and tells each
// message's done.
func (t *AMQP) await(conn *amqp.Connection, waits <-chan confirmWait, returns <-chan amqp.Return) {
	returned := map[string]amqp.Return{}
	for w := range waits {
		timer := time.NewTimer(max(time.Until(w.sent.Add(publishTimeout)), 0))
		select {
		case <-w.dc.Done():
			timer.Stop()
		case <-timer.C:
			// Closing the connection nacks the rest of the window at once.
			_ = conn.Close() // the error that matters is the timeout
			<-w.dc.Done()
			w.done(fmt.Errorf("amqp: no confirm within %v", publishTimeout))
			continue
		}
		// A return comes before the confirm of its message.
		for more := true; more; {
			select {
			case r, ok := <-returns:
				if ok {
					returned[r.MessageId] = r
				} else {
					more = false
				}
			default:
				more = false
			}
		}
		if r, ok := returned[w.id]; ok {
			delete(returned, w.id)
			w.done(fmt.Errorf("amqp: returned by the broker: %d %s (no queue took it)", r.ReplyCode, r.ReplyText))
			continue
		}
		if !w.dc.Acked() {
			if conn.IsClosed() {
				w.done(errors.New("amqp: the connection closed before the confirm"))
			} else {
				w.done(errors.New("amqp: the broker nacked it"))
			}
			continue
		}
		w.done(nil)
	}
}

// Publish sends e and waits for the broker's confirm.
func (t *AMQP) Publish(ctx context.Context, e *Event) error {
	return publishOne(ctx, t, e)
}

// drop closes a connection after a failure, so that the next publish
// opens a new one.
func (t *AMQP) drop() {
	if t.conn != nil {
		_ = t.conn.Close() // it failed already
	}
	if t.waits != nil {
		close(t.waits) // its waiter ends once the confirms waited for are in
	}
	t.conn, t.ch, t.waits = nil, nil, nil
}

// Close closes the connection.
func (t *AMQP) Close() error {
	if t.conn == nil {
		return nil
	}
	err := t.conn.Close()
	close(t.waits)
	t.conn, t.ch, t.waits = nil, nil, nil
	if errors.Is(err, amqp.ErrClosed) {
		return nil
	}
	return err
}

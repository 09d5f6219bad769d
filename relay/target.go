package relay

import (
	"context"
	"errors"
	"fmt"
	"net/url"
)

// ErrBadTarget is wrapped by the errors of Open, and of Dir.UseContract,
// for a target that cannot take the relay's events as it is set up: a URL
// of the wrong form, a Kafka topic that does not exist, a receiving
// queue whose contract would dead-letter them. Nothing was sent; the
// operator must change the target (spool relay exits 2).
var ErrBadTarget = errors.New("target cannot take the events")

// Target is where a relay delivers events.
type Target interface {
	// Publish delivers e and returns nil only once the target acknowledged
	// it (durably, as far as the target can say). An error marked with
	// spool.Permanent is one that sending again cannot fix (the target
	// refuses the event itself); any other is transient, and the event is
	// sent again later. Publish may be called from several goroutines at
	// once, for events of different aggregates: a relay has at most one
	// event of an aggregate in a plain Target's hands at a time, since
	// two calls at once may reach the target in either order.
	Publish(ctx context.Context, e *Event) error
	// Close releases the target's connections, once no call is under way.
	Close() error
}

// Pipeline is a Target that keeps many events in flight on one ordered
// stream, where the broker keeps publish order: JetStream's asynchronous
// publish on one connection, AMQP publisher confirms on one channel, one
// Kafka partition per aggregate through an idempotent producer. A relay
// hands it an aggregate's events one after another without waiting for
// their acknowledgements, up to Window in flight in all.
type Pipeline interface {
	Target
	// Send hands e to the target and returns without waiting for its
	// acknowledgement. done is called exactly once, from any goroutine
	// (Send's own included, for a failure found before sending), with e's
	// outcome by Publish's rules: nil once the target acknowledged it.
	// Events handed over one after another reach the target in that
	// order. Send is called from one goroutine at a time, never with more
	// than Window events whose done was not called yet; ctx is not a
	// cancellation of the events already sent.
	Send(ctx context.Context, e *Event, done func(error))
	// Window is the most events the target takes in flight at once.
	Window() int
}

// Open returns the target rawURL names:
//
//	dir://PATH                                  another spool queue
//	http://..., https://...                     a POST per event
//	nats://HOST:PORT/SUBJECT?stream=NAME        a JetStream stream
//	amqp://USER:PASS@HOST:PORT/VHOST?exchange=X&routing_key=K, or ?queue=Q
//	kafka://HOST:PORT/TOPIC                     a Kafka topic
//
// Each is described by its own constructor.
func Open(ctx context.Context, rawURL string) (Target, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("target %q: %w", Redact(rawURL), err)
	}
	switch u.Scheme {
	case "dir":
		return OpenDir(u)
	case "http", "https":
		return OpenHTTP(rawURL)
	case "nats":
		return OpenNATS(ctx, u)
	case "amqp", "amqps":
		return OpenAMQP(ctx, u)
	case "kafka":
		return OpenKafka(ctx, u)
	}
	return nil, fmt.Errorf("target %q: %w: want dir://, http(s)://, nats://, amqp:// or kafka://", Redact(rawURL), ErrBadTarget)
}

// Redact is rawURL with its password, if any, replaced by "xxxxx": for
// messages, logs and the outbox's target column.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

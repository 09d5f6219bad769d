package relay

import (
	"context"
	"fmt"
	"net/url"
)

// Target is where a relay delivers events.
type Target interface {
	// Publish delivers e and returns nil only once the target acknowledged
	// it (durably, as far as the target can say). An error marked with
	// spool.Permanent is one that sending again cannot fix (the target
	// refuses the event itself); any other is transient, and the event is
	// sent again later. Publish is called for one event at a time.
	Publish(ctx context.Context, e *Event) error
	// Close releases the target's connections.
	Close() error
}

// Open returns the target rawURL names:
//
//	dir://PATH                                  another spool queue
//	http://..., https://...                     a POST per event
//	nats://HOST:PORT/SUBJECT?stream=NAME        a JetStream stream
//	amqp://USER:PASS@HOST:PORT/VHOST?exchange=X&routing_key=K, or ?queue=Q
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
	}
	return nil, fmt.Errorf("target %q: want dir://, http(s)://, nats:// or amqp://", Redact(rawURL))
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

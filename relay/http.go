package relay

import (
	"context"
	"fmt"
	"net/http"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/handler"
)

// HTTP is the http(s):// target: a POST of each event's JSON document
// (Event.Body) with the event's id as its Idempotency-Key, by the rules of
// spool consume --post (handler.Post): a 2xx is the acknowledgement; 408,
// 429, 5xx and network errors are transient (Retry-After honoured as the
// least wait); any other status, a redirect included, is permanent. The
// receiver dedups repeats by the Idempotency-Key. The row's headers are
// sent as HTTP headers (Event.Headers: the trace continued as traceparent,
// Spool-Tenant, Spool-Schema-Version), with Spool-Aggregate and Spool-Type.
type HTTP struct {
	post *handler.Post
}

// OpenHTTP returns the target posting to rawURL.
func OpenHTTP(rawURL string) (*HTTP, error) {
	p, err := handler.NewPost(rawURL, handler.PostOptions{UserAgent: "spool-relay", Connections: DefaultPlainWindow})
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	return &HTTP{post: p}, nil
}

// Publish posts e.
func (t *HTTP) Publish(ctx context.Context, e *Event) error {
	body, err := e.Body()
	if err != nil {
		return spool.Permanent(err)
	}
	h := http.Header{}
	for k, v := range e.Headers() {
		h.Set(k, v)
	}
	h.Set("Spool-Aggregate", e.Row.Aggregate)
	h.Set("Spool-Type", e.Row.Type)
	return t.post.Send(ctx, e.ID, body, h)
}

// Close closes nothing: the client's idle connections go with the process.
func (t *HTTP) Close() error { return nil }

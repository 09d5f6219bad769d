package relay

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/spoolq/spool/queue"
)

// Dir is the dir://PATH target: another spool queue. Each event becomes
// a file in its inbox/, written as spool enqueue writes one (a hidden temp
// file, fsynced, renamed in without replacing anything, the directory
// fsynced): the rename is the acknowledgement. The file is named after the
// event's id (ID.json), so that the names sort as the outbox rows do; the
// message's msg_id is the event's id, so a repeat (the same name, kept
// beside the first with a ~N suffix) is a duplicate to the receiving
// consumer's ledger, which processes the event once.
type Dir struct {
	d *queue.Dir
}

// OpenDir opens the queue of a dir:// URL: dir:///abs/path or
// dir://./rel/path. The queue must exist (spool init).
func OpenDir(u *url.URL) (*Dir, error) {
	path := u.Host + u.Path
	if u.Opaque != "" {
		path = u.Opaque
	}
	if path == "" {
		return nil, errors.New("target dir://: want dir://PATH")
	}
	d, err := queue.Open(path)
	if err != nil {
		return nil, fmt.Errorf("target dir://%s: %w", path, err)
	}
	return &Dir{d: d}, nil
}

// Publish writes e into the queue's inbox/.
func (t *Dir) Publish(_ context.Context, e *Event) error {
	body, err := e.Body()
	if err != nil {
		return err
	}
	if _, err := t.d.WriteFile(queue.Inbox, e.ID+".json", body); err != nil {
		return fmt.Errorf("dir %s: %w", t.d.Path(), err)
	}
	return nil
}

// Close closes the queue.
func (t *Dir) Close() error { return t.d.Close() }

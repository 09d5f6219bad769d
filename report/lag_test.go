package report

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spoolq/spool/queue"
)

// TestMeasureLag: over when inbox holds more than the threshold, or, with
// a bound, when its oldest message is older; the age and held/ are read
// only when asked for.
func TestMeasureLag(t *testing.T) {
	ctx := context.Background()
	d, _ := setup(t)
	put(t, d, queue.Inbox, "a.json", "{}")
	put(t, d, queue.Inbox, "b.json", "{}")
	put(t, d, queue.Held, "h.json", "{}")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(d.StagePath(queue.Inbox), "a.json"), old, old); err != nil {
		t.Fatal(err)
	}
	l, err := MeasureLag(ctx, d, 2, -1, false)
	if err != nil || l.Inbox != 2 || l.Over || l.OldestAgeSeconds != nil || l.MaxAgeSeconds != nil || l.Held != 0 {
		t.Errorf("names only: %+v, %v", l, err)
	}
	if l, err = MeasureLag(ctx, d, 1, -1, false); err != nil || !l.Over {
		t.Errorf("over the threshold: %+v, %v", l, err)
	}
	l, err = MeasureLag(ctx, d, 5, time.Minute, false)
	if err != nil || !l.Over || l.OldestAgeSeconds == nil || *l.OldestAgeSeconds < 3599 || l.MaxAgeSeconds == nil || *l.MaxAgeSeconds != 60 {
		t.Errorf("over the age: %+v, %v", l, err)
	}
	if l, err = MeasureLag(ctx, d, 5, -1, true); err != nil || l.Over || l.Held != 1 || l.OldestAgeSeconds == nil {
		t.Errorf("full: %+v, %v", l, err)
	}
}

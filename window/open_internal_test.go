package window

import (
	"testing"
	"time"
)

// TestOpenTimes: Open takes the window's times from the URL's ttl and
// inflight, and keeps the defaults for those it does not give.
func TestOpenTimes(t *testing.T) {
	for _, tt := range []struct {
		url           string
		ttl, inFlight time.Duration
	}{
		{"redis://127.0.0.1:1/2?ttl=10m&inflight=5s", 10 * time.Minute, 5 * time.Second},
		{"redis://127.0.0.1:1/2?inflight=5s", DefaultTTL, 5 * time.Second},
		{"redis://127.0.0.1:1/2", DefaultTTL, DefaultInFlight},
	} {
		w, err := Open(tt.url)
		if err != nil {
			t.Fatalf("Open(%q): %v", tt.url, err)
		}
		if w.ttl != tt.ttl || w.inFlight != tt.inFlight {
			t.Errorf("Open(%q): ttl %v, inflight %v; want %v, %v", tt.url, w.ttl, w.inFlight, tt.ttl, tt.inFlight)
		}
		if err := w.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

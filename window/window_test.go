package window_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/internal/testenv"
	"github.com/spoolq/spool/window"
)

// open returns a window on the machine's Redis (SPOOL_TEST_REDIS) with a
// prefix of the test's own.
func open(t testing.TB) *window.Redis {
	t.Helper()
	w, err := window.Open(testenv.Service(t, "SPOOL_TEST_REDIS", "redis://127.0.0.1:6379/0"))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	w.SetPrefix("spooltest:" + hex.EncodeToString(b) + ":")
	t.Cleanup(func() { _ = w.Close() })
	if err := w.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w
}

func states(es []spool.WindowEntry) []spool.WindowState {
	s := make([]spool.WindowState, len(es))
	for i, e := range es {
		s[i] = e.State
	}
	return s
}

// TestWindowProtocol: SET NX with an owner, done after the commit,
// compare-and-delete on failure.
func TestWindowProtocol(t *testing.T) {
	w := open(t)
	ctx := context.Background()
	es, err := w.Acquire(ctx, []string{"a", "b", "c"}, "s1")
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range states(es) {
		if s != spool.WindowAcquired {
			t.Errorf("key %d: %v on a new key, want acquired", i, s)
		}
	}
	// Another owner waits; the same owner holds it already.
	if es, _ = w.Acquire(ctx, []string{"a"}, "s2"); es[0].State != spool.WindowBusy {
		t.Errorf("another owner: %v, want busy", es[0].State)
	}
	if es, _ = w.Acquire(ctx, []string{"a"}, "s1"); es[0].State != spool.WindowAcquired {
		t.Errorf("the same owner: %v, want acquired", es[0].State)
	}
	if err := w.Done(ctx, []string{"a"}, []string{"h-a"}); err != nil {
		t.Fatal(err)
	}
	// Release by another owner deletes nothing; by the owner only its
	// own in-flight keys, never a done one.
	if err := w.Release(ctx, []string{"b"}, "s2"); err != nil {
		t.Fatal(err)
	}
	if es, _ = w.Acquire(ctx, []string{"b"}, "s2"); es[0].State != spool.WindowBusy {
		t.Errorf("b after another owner's release: %v, want busy (not deleted)", es[0].State)
	}
	if err := w.Release(ctx, []string{"a", "b", "c"}, "s1"); err != nil {
		t.Fatal(err)
	}
	es, _ = w.Acquire(ctx, []string{"a", "b", "c"}, "s2")
	if es[0].State != spool.WindowDone || es[0].Hash != "h-a" {
		t.Errorf("a after release: %+v, want done with its hash", es[0])
	}
	if es[1].State != spool.WindowAcquired || es[2].State != spool.WindowAcquired {
		t.Errorf("b, c after their owner's release: %v, want acquired by the next", states(es[1:]))
	}
}

// TestOpenRefuses: what --dedup refuses, before connecting.
func TestOpenRefuses(t *testing.T) {
	for _, u := range []string{"", "http://h:1/0", "redis://", "redis://h:1/x", "redis://h:1/0?ttl=0s",
		"redis://h:1/0?ttl=abc", "redis://h:1/0?inflight=2h", "redis://h:1/0?bogus=1"} {
		if _, err := window.Open(u); !errors.Is(err, window.ErrBadURL) {
			t.Errorf("Open(%q) = %v, want ErrBadURL", u, err)
		}
	}
	w, err := window.Open("redis://127.0.0.1:1/2?ttl=10m&inflight=5s")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Ping(context.Background()); err == nil {
		t.Errorf("Ping of a port nobody listens on succeeded")
	}
}

// BenchmarkAcquireDone: one batch of 256 msg_ids through the window as a
// consumer sends it (acquire, then done), on the machine's Redis.
func BenchmarkAcquireDone(b *testing.B) {
	w := open(b)
	ctx := context.Background()
	ids := make([]string, 256)
	hashes := make([]string, 256)
	for i := range ids {
		ids[i], hashes[i] = hex.EncodeToString([]byte{byte(i), byte(i >> 8)}), "h"
	}
	if _, err := w.Acquire(ctx, ids, "s"); err != nil {
		b.Fatal(err)
	}
	if err := w.Done(ctx, ids, hashes); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := w.Acquire(ctx, ids, "s"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(ids))/b.Elapsed().Seconds(), "msgids/s")
}

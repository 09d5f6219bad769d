//go:build linux

package queue

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// fakeHostname makes thisHost see name and err for the rest of the test.
// Tests that call it must not run in parallel.
func fakeHostname(t *testing.T, name string, err error) {
	t.Helper()
	saved := hostname
	hostname = func() (string, error) { return name, err }
	t.Cleanup(func() { hostname = saved })
}

func TestThisHost(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"db1.internal", nil, "db1.internal"},
		{"a/b@c", nil, "a_b_c"},
		{"", nil, "localhost"},
		{"", errors.New("uname failed"), "localhost"},
		{"partial", errors.New("uname failed"), "localhost"},
	} {
		fakeHostname(t, c.name, c.err)
		if got := thisHost(); got != c.want {
			t.Errorf("thisHost() with os.Hostname = (%q, %v): %q, want %q", c.name, c.err, got, c.want)
		}
	}
}

// When os.Hostname fails, Join and Recover must still agree that a session
// is this host's, so its dead claims are recovered at once (its lock is
// free) instead of waiting out the lease as another host's would.
func TestRecoverOwnDeadSessionWhenHostnameFails(t *testing.T) {
	fakeHostname(t, "", errors.New("uname failed"))
	d := newQueue(t)
	put(t, d, Inbox, "a.json", "1")
	dead, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(dead.ID(), "@localhost") {
		t.Fatalf("session ID %q, want it to end in @localhost", dead.ID())
	}
	if _, err := dead.Claim("a.json"); err != nil {
		t.Fatal(err)
	}
	// Dying: the claim keeps the directory, and the lock is released.
	if err := dead.Close(); err == nil {
		t.Fatal("Close of a session with a claim in flight succeeded")
	}
	rec, err := d.Recover(context.Background(), func(context.Context, *Orphan) (Stage, error) { return Inbox, nil }, DefaultLease)
	if err != nil {
		t.Fatal(err)
	}
	rec.Uncalled = nil // TestRecoverUncalled
	if len(rec.Returned) != 1 || rec.Returned[0].Stored != "a.json" {
		t.Fatalf("Recover returned %+v, want the dead session's claim", rec.Returned)
	}
	rec.Returned = nil
	if !reflect.DeepEqual(rec, Recovered{Sessions: 1, ToInbox: 1}) {
		t.Fatalf("Recover = %+v, want the dead session recovered without waiting for its lease", rec)
	}
	if got := names(t, d.StagePath(Inbox)); strings.Join(got, ",") != "a.json" {
		t.Fatalf("inbox = %v, want the claim back", got)
	}
}

package metrics

import (
	"strings"
	"testing"
)

// TestSpaceProblem: below 64 MiB or 1024 inodes the queue's filesystem is
// short; inodes count only on a filesystem that counts them.
func TestSpaceProblem(t *testing.T) {
	for _, c := range []struct {
		s    Space
		want string
	}{
		{Space{bytes: 1 << 30, inodes: 1 << 20, countsInodes: true}, ""},
		{Space{bytes: 1 << 20, inodes: 1 << 20, countsInodes: true}, "only 1.0 MiB free"},
		{Space{bytes: 1 << 30, inodes: 10, countsInodes: true}, "only 10 inodes free"},
		{Space{bytes: 1 << 30}, ""},
	} {
		if got := c.s.Problem("/q"); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%+v: %q, want %q", c.s, got, c.want)
		}
	}
	if got := (Space{bytes: 1536 << 20}).String(); got != "1.5 GiB free" {
		t.Errorf("String() = %q", got)
	}
}

// TestInotifyProblem: a user at either limit cannot watch, and is told
// the sysctl that doubles it.
func TestInotifyProblem(t *testing.T) {
	u := InotifyUse{instances: 1, watches: 5, maxInstances: 128, maxWatches: 8192}
	if p := u.Problem(); p != "" {
		t.Errorf("below the limits: %q", p)
	}
	u.instances = 128
	if p := u.Problem(); !strings.Contains(p, "max_user_instances=256") {
		t.Errorf("at the instances' limit: %q", p)
	}
	u.instances, u.watches = 1, 8192
	if p := u.Problem(); !strings.Contains(p, "max_user_watches=16384") {
		t.Errorf("at the watches' limit: %q", p)
	}
}

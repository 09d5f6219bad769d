package task_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/task"
)

// TestSamePerson: persons are compared across realms and case, by name
// and by a token's os=; a uid is no one's name.
func TestSamePerson(t *testing.T) {
	tok := func(name, osUser string) task.Identity {
		return task.Identity{Name: "token:" + name, OS: osUser, Role: task.RoleApprover, Via: ledger.AuditHTTP}
	}
	for _, c := range []struct {
		a, b task.Identity
		same bool
	}{
		{task.OSUser("root"), tok("Root", ""), true},
		{task.OSUser("alice"), tok("ops-1", "alice"), true},
		{task.OSUser("alice"), tok("ops-1", "ALICE"), true},
		{tok("a", "x"), tok("b", "x"), true},
		{tok("alice", ""), tok("ALICE", ""), true},
		{task.OSUser("alice"), task.OSUser("bob"), false},
		{task.OSUser("alice"), tok("bob", ""), false},
		{task.OSUser("alice"), tok("bob", "carol"), false},
		// A name without a realm is in its Via's: rows written before realms.
		{task.Identity{Name: "alice", Via: ledger.AuditCLI}, task.OSUser("Alice"), true},
		{task.Identity{Name: "olga", Via: ledger.AuditHTTP}, tok("olga", ""), true},
		{task.UID(4242), task.OSUser("4242"), false},
		{task.UID(4242), task.UID(4242), true},
	} {
		if got := task.SamePerson(c.a, c.b); got != c.same {
			t.Errorf("SamePerson(%+v, %+v) = %v, want %v", c.a, c.b, got, c.same)
		}
		if got := task.SamePerson(c.b, c.a); got != c.same {
			t.Errorf("SamePerson(%+v, %+v) = %v, want %v (symmetric)", c.b, c.a, got, c.same)
		}
	}
}

// TestOwnRequestAcrossRealms: an approval is refused when it comes from
// the requester in another realm or case: a token named Root for OS user
// root's request, a token whose line says os=alice for alice's; a token
// named alice with no os= for the OS user ALICE's request too.
func TestOwnRequestAcrossRealms(t *testing.T) {
	for _, c := range []struct {
		asker, approver task.Identity
	}{
		{task.OSUser("root"), task.Identity{Name: "token:Root", Role: task.RoleApprover, Via: ledger.AuditHTTP}},
		{task.OSUser("alice"), task.Identity{Name: "token:ops", OS: "alice", Role: task.RoleApprover, Via: ledger.AuditHTTP}},
		{task.Identity{Name: "token:ops", OS: "alice", Role: task.RoleOperator, Via: ledger.AuditHTTP}, task.OSUser("alice")},
		{task.OSUser("ALICE"), task.Identity{Name: "token:alice", Role: task.RoleApprover, Via: ledger.AuditHTTP}},
	} {
		d, l := deadQueue(t, 2)
		s := &task.Service{Dir: d, Ledger: l, Contract: spool.DefaultContract(), Policy: task.Policy{Set: true, ReplayOver: 0, DiscardOver: 0}}
		tk, _, err := s.Create(t.Context(), c.asker, task.Request{Kind: task.Replay, Selection: task.Selection{All: true}})
		if err != nil || tk.State != task.StateWaiting || tk.By != c.asker.Name || tk.ByOS != c.asker.OS {
			t.Fatalf("create as %+v: %+v, %v", c.asker, tk, err)
		}
		if _, err := s.Approve(t.Context(), c.approver, tk.ID, tk.Digest); !errors.Is(err, task.ErrOwnRequest) {
			t.Errorf("%s approving %s's request: %v, want ErrOwnRequest", c.approver.Name, c.asker.Name, err)
		}
		other := task.OSUser("someone-else")
		if _, err := s.Approve(t.Context(), other, tk.ID, tk.Digest); err != nil {
			t.Errorf("another person's approval: %v", err)
		}
	}
}

func hashOf(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TestParseTokensOSField: the fourth field os=USER names the holder's OS
// user; anything else there, a byte order mark or an invisible
// character in a name is an error naming the line.
func TestParseTokensOSField(t *testing.T) {
	in := "olga operator " + hashOf("o") + " os=olga.k\nada approver " + hashOf("a") + "\n"
	ts, err := task.ParseTokens(strings.NewReader(in))
	if err != nil || len(ts) != 2 || ts[0].OS != "olga.k" || ts[1].OS != "" || ts[0].Line != 1 || ts[1].Line != 2 {
		t.Fatalf("%+v, %v", ts, err)
	}
	id, err := ts.Identify("o")
	if err != nil || id.Name != "token:olga" || id.OS != "olga.k" {
		t.Fatalf("identify: %+v, %v", id, err)
	}
	for in, want := range map[string]string{
		"\uFEFFolga operator " + hashOf("o") + "\n":                     "line 1: a UTF-8 byte order mark",
		"# c\nolga operator " + hashOf("o") + " \uFEFF\n":               "line 2: a UTF-8 byte order mark",
		"olga operator " + hashOf("o") + " alice\n":                     `"alice": want os=USER`,
		"olga operator " + hashOf("o") + " os=\n":                       `"os=": want os=USER`,
		"olga operator " + hashOf("o") + " os=a b\n":                    "want NAME ROLE SHA256-OF-TOKEN [os=USER], got 5 fields",
		"ol\u200bga operator " + hashOf("o") + "\n":                     "line 1: name",
		"ol\x01ga operator " + hashOf("o") + "\n":                       "line 1: name",
		"olga operator " + hashOf("o") + " os=\xff\n":                   "line 1: os user",
		"olga operator " + hashOf("o") + "\nolga viewer " + hashOf("v"): "line 2: name \"olga\" already on line 1",
	} {
		if _, err := task.ParseTokens(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

// TestReadTokenFile: a token file that every user may read, or others
// change, is refused naming the file and chmod 600; a FIFO is refused at
// once, not waited on; a directory is refused; a 0600 or 0640 file is
// read.
func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	if err := os.WriteFile(path, []byte("olga operator "+hashOf("o")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o600, 0o640, 0o400} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if ts, err := task.ReadTokenFile(path); err != nil || len(ts) != 1 {
			t.Errorf("mode %04o: %v, %v", mode, ts, err)
		}
	}
	for mode, want := range map[os.FileMode]string{
		0o644: "mode 0644 lets every user read it. Try: chmod 600 " + path,
		0o604: "mode 0604 lets every user read it",
		0o660: "mode 0660 lets users other than its owner change it. Try: chmod 600 " + path,
		0o602: "mode 0602 lets users other than its owner change it",
	} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := task.ReadTokenFile(path)
		if err == nil || !errors.Is(err, task.ErrUnsafeTokenFile) || !strings.Contains(err.Error(), want) ||
			!strings.HasPrefix(err.Error(), "token file "+path+": ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("mode %04o: %v, want one line naming the file and %q", mode, err, want)
		}
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := task.ReadTokenFile(fifo); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, task.ErrUnsafeTokenFile) || !strings.Contains(err.Error(), "a FIFO, not a regular file") {
			t.Errorf("FIFO: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadTokenFile of a FIFO with no writer hangs")
	}
	if _, err := task.ReadTokenFile(dir); !errors.Is(err, task.ErrUnsafeTokenFile) || !strings.Contains(err.Error(), "a directory") {
		t.Errorf("directory: %v", err)
	}
}

// TestAddToken: AddToken creates the file 0600, appends a line whose hash
// is the returned token's, with os=USER when given, after a last line
// without its newline too; a taken name (in any case), a bad name, an
// unsafe or broken file are refused and write nothing.
func TestAddToken(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	tok, err := task.AddToken(path, "olga", task.RoleOperator, "olga.k")
	if err != nil || len(tok) < 40 {
		t.Fatalf("AddToken = %q, %v", tok, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new file: %v, %v; want mode 0600", fi.Mode(), err)
	}
	ts, err := task.ReadTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := ts.Identify(tok); err != nil || id.Name != "token:olga" || id.OS != "olga.k" || id.Role != task.RoleOperator {
		t.Fatalf("identify the new token: %+v, %v", id, err)
	}
	// A hand-edited last line without its newline.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("vic viewer " + hashOf("v")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	tok2, err := task.AddToken(path, "ada", task.RoleApprover, "")
	if err != nil {
		t.Fatal(err)
	}
	if ts, err = task.ReadTokenFile(path); err != nil || len(ts) != 3 {
		t.Fatalf("after a second add: %+v, %v", ts, err)
	}
	if id, err := ts.Identify(tok2); err != nil || id.Name != "token:ada" || id.OS != "" {
		t.Fatalf("identify ada: %+v, %v", id, err)
	}
	before, _ := os.ReadFile(path)
	for _, c := range []struct {
		name string
		role task.Role
		os   string
	}{{"OLGA", task.RoleViewer, ""}, {"a b", task.RoleViewer, ""}, {"x#y", task.RoleViewer, ""}, {"eve", task.RoleNone, ""}, {"eve", task.RoleViewer, "a b"}} {
		if _, err := task.AddToken(path, c.name, c.role, c.os); !errors.Is(err, task.ErrTokenRefused) {
			t.Errorf("AddToken(%q, %v, %q) = %v, want ErrTokenRefused", c.name, c.role, c.os, err)
		}
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := task.AddToken(path, "eve", task.RoleViewer, ""); !errors.Is(err, task.ErrUnsafeTokenFile) || !errors.Is(err, task.ErrTokenRefused) {
		t.Errorf("AddToken to a 0644 file = %v", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("refused adds changed the file:\n%s\nwas:\n%s", after, before)
	}
}

// TestQueuePolicy: the ledger adopts the configuration's section the
// first time (audited), once; a dry look adopts nothing; once the ledger
// holds a policy, a missing section changes nothing and a differing one
// is refused naming both (audited when adopting); SetPolicy changes it
// with the old and new values audited, and a running Service judges by
// the ledger's policy as it is now.
func TestQueuePolicy(t *testing.T) {
	d, l := deadQueue(t, 3)
	ctx := t.Context()
	s := &task.Service{Dir: d, Ledger: l, Contract: spool.DefaultContract(), Policy: task.NoPolicy, Host: "h", PID: 1}
	alice := task.OSUser("alice")
	conf := task.Policy{Set: true, ReplayOver: 2, DiscardOver: 0}
	if p, err := s.QueuePolicy(ctx, alice, conf, "/q/spool.conf", false); err != nil || p != conf {
		t.Fatalf("dry: %+v, %v", p, err)
	}
	if r, err := task.LedgerPolicy(ctx, l); err != nil || r.Set {
		t.Fatalf("a dry look adopted: %+v, %v", r, err)
	}
	if p, err := s.QueuePolicy(ctx, alice, conf, "/q/spool.conf", true); err != nil || p != conf {
		t.Fatalf("adopt: %+v, %v", p, err)
	}
	if p, err := s.QueuePolicy(ctx, alice, conf, "/q/spool.conf", true); err != nil || p != conf {
		t.Fatalf("again: %+v, %v", p, err)
	}
	// The file moved aside: the ledger's holds.
	if p, err := s.QueuePolicy(ctx, alice, task.NoPolicy, "/q/spool.conf", true); err != nil || p != conf {
		t.Fatalf("without the section: %+v, %v", p, err)
	}
	// A task is judged by it even when the Service was built without.
	p, err := s.Preview(ctx, task.Request{Kind: task.Replay, Selection: task.Selection{All: true}})
	if err != nil || !p.NeedsApproval {
		t.Fatalf("preview under the ledger's policy: %+v, %v", p, err)
	}
	lax := task.Policy{Set: true, ReplayOver: 1000, DiscardOver: 0}
	_, err = s.QueuePolicy(ctx, alice, lax, "/q/spool.conf", true)
	var mm *task.PolicyMismatchError
	if !errors.As(err, &mm) || !errors.Is(err, task.ErrPolicyMismatch) ||
		!strings.Contains(err.Error(), "(replay_over=1000 discard_over=0)") || !strings.Contains(err.Error(), "(replay_over=2 discard_over=0, set by os:alice at ") {
		t.Fatalf("mismatch: %v", err)
	}
	rec, err := task.LedgerPolicy(ctx, l)
	if err != nil || rec.Policy != conf || rec.SetBy != "os:alice" || rec.Source != ledger.PolicyFromConfig {
		t.Fatalf("ledger's policy: %+v, %v", rec, err)
	}
	bob := task.OSUser("bob")
	to, err := rec.Policy.With("replay_over=none")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetPolicy(ctx, task.Identity{Name: "token:vic", Role: task.RoleOperator, Via: ledger.AuditHTTP}, rec, to); !errors.Is(err, task.ErrForbidden) {
		t.Fatalf("an operator's SetPolicy: %v", err)
	}
	now, err := s.SetPolicy(ctx, bob, rec, to)
	if err != nil || now.Policy != (task.Policy{Set: true, ReplayOver: -1, DiscardOver: 0}) || now.SetBy != "os:bob" || now.Source != ledger.PolicySet {
		t.Fatalf("SetPolicy: %+v, %v", now, err)
	}
	if _, err := s.SetPolicy(ctx, bob, rec, to); !errors.Is(err, ledger.ErrPolicyChanged) {
		t.Fatalf("SetPolicy from a stale policy: %v", err)
	}
	if p, err := s.Preview(ctx, task.Request{Kind: task.Replay, Selection: task.Selection{All: true}}); err != nil || p.NeedsApproval {
		t.Fatalf("preview after replay_over=none: %+v, %v", p, err)
	}
	rows, err := l.Audit().List(context.WithoutCancel(ctx), ledger.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Actor+" "+r.Action+" "+r.Outcome+" "+r.Selection+" "+r.Detail)
	}
	want := []string{
		`os:alice policy ok {"file":"/q/spool.conf","new":{"discard_over":0,"replay_over":2},"old":null} adopted the approval section of /q/spool.conf: replay_over=2 discard_over=0`,
		`os:alice policy refused {"file":"/q/spool.conf","ledger":{"discard_over":0,"replay_over":2},"section":{"discard_over":0,"replay_over":1000}} ` + err2text(mm),
		`token:vic policy refused {"new":{"discard_over":0,"replay_over":null},"old":{"discard_over":0,"replay_over":2}} token:vic as operator may not set the approval policy: approver needed: role may not do that`,
		`os:bob policy ok {"new":{"discard_over":0,"replay_over":null},"old":{"discard_over":0,"replay_over":2}} approval policy replay_over=2 discard_over=0 -> replay_over=none discard_over=0`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func err2text(e error) string { return e.Error() }

// TestPolicyWith: the settings of spool policy set.
func TestPolicyWith(t *testing.T) {
	var p task.Policy
	p, err := p.With("discard_over=0")
	if err != nil || p != (task.Policy{Set: true, ReplayOver: -1, DiscardOver: 0}) {
		t.Fatalf("%+v, %v", p, err)
	}
	if p, err = p.With("replay_over=12"); err != nil || p.ReplayOver != 12 || p.Settings() != "replay_over=12 discard_over=0" {
		t.Fatalf("%+v, %v", p, err)
	}
	for _, bad := range []string{"replay_over", "replay_over=-1", "replay_over=1.5", "Replay_over=1", "replay_over=", "replay_over=+3", "x=1"} {
		if _, err := p.With(bad); !errors.Is(err, task.ErrBadRequest) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if task.NoPolicy.Settings() != "no policy" {
		t.Errorf("NoPolicy.Settings() = %q", task.NoPolicy.Settings())
	}
}

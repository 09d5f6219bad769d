//go:build linux

package e2e

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hostileTimeout bounds each command on the hostile inbox: a FIFO opened
// for reading, or a symlink to /dev/zero read to its end, would hang.
const hostileTimeout = 45 * time.Second

// TestHostileInbox feeds spool an inbox of everything a careless or
// malicious producer can leave there. Poison must be dead-lettered with the
// right reason without blocking the valid messages behind it; nothing may be
// followed out of the queue, opened when it is not a regular file, or read
// whole when it is too large; entries that are not messages stay untouched.
func TestHostileInbox(t *testing.T) {
	t.Parallel()
	poison := func(name, reason, data string) *genFile {
		return &genFile{Name: name, Data: []byte(data), Stage: errorStage, Reason: reason}
	}
	validMsg := `{"msg_id":"ok-1","order_no":"o-1","seq":1,"amount":10.5}`
	c := &corpus{valid: map[string]*genFile{}, copies: map[string]int{}, outside: map[string]outsideFile{}}
	c.files = []*genFile{
		poison("empty.json", "parse", ""),
		poison("whitespace.json", "parse", " \n\t\r\n "),
		poison("null.json", "parse", "null"),
		poison("array.json", "parse", "[]"),
		poison("string.json", "parse", `"str"`),
		poison("number.json", "parse", `42`),
		poison("trailing.json", "parse", validMsg+` garbage`),
		poison("two-objects.json", "parse", validMsg+"\n"+validMsg),
		poison("deep.json", "parse", strings.Repeat("[", 100000)),
		poison("deep-object.json", "parse", `{"msg_id":"deep","order_no":"o","seq":1,"amount":1,"x":`+strings.Repeat(`{"a":`, 100000)),
		poison("bad-utf8.json", "parse", `{"msg_id":"u-1","order_no":"o-u","seq":1,"amount":1,"note":"`+"\xff\xfe\xc3"+`"}`),
		poison("bad\n, \"name\".json", "parse", `{"msg_id":`),
		poison("dup-key.json", "invalid-field", `{"msg_id":"k-1","order_no":"o-k","seq":1,"amount":1,"amount":2}`),
		{Name: "big.json", Data: hugeMessage(5 << 20), Stage: errorStage, Reason: "too-large"},
		{Name: "x.json", Special: "symlink", Stage: errorStage, Reason: "not-regular"},
		{Name: "zero.json", Special: "symlink", Target: "/dev/zero", Stage: errorStage, Reason: "not-regular"},
		{Name: "f.json", Special: "fifo", Stage: errorStage, Reason: "not-regular"},
		{Name: "d.json", Special: "dir", Stage: errorStage, Reason: "not-regular"},
	}
	for i, name := range []string{"заказ 1.json", "a\nb.json", "with space.json", `comma, "quote".json`, "tab\there.json"} {
		id := "ok-" + strconv.Itoa(i+1)
		g := &genFile{
			Name: name, Data: validMessage(id, strconv.Quote(id), "o-"+id, 1, "10.50", ""),
			MsgID: id, OrderNo: "o-" + id, Seq: 1, Amount: "10.50", Stage: done,
		}
		c.files = append(c.files, g)
		c.valid[id] = g
		c.copies[id] = 1
	}
	q := newQueue(t, c)
	// Entries that are not messages: spool must leave them exactly where
	// and as they are.
	in := filepath.Join(q, inbox)
	for name, data := range map[string]string{
		".x.json":    validMsg,
		"x.json.tmp": `{"msg_id":"tmp"`,
		"notes.txt":  "not a message\n",
		".json":      validMsg,
		"JSON":       validMsg,
	} {
		if err := os.WriteFile(filepath.Join(in, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(in, ".hidden-dir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	leftovers := func() map[string]file {
		m := map[string]file{}
		for _, f := range entries(t, q, inbox) {
			if !isMessageName(f.Name) {
				m[f.Name] = f
			}
		}
		return m
	}
	before := leftovers()
	if len(before) != 6 {
		t.Fatalf("set-up: %d non-message entries in inbox/, want 6", len(before))
	}

	r := runWithin(t, hostileTimeout, "lag", q, "100")
	if want := "inbox=" + strconv.Itoa(len(c.files)) + " processing=0 error=0\n"; r.code != 0 || r.stdout != want {
		t.Errorf("lag before consume: want %q exit 0, got\n%s", want, r)
	}

	// schema reads only the valid messages waiting in inbox/: no link is
	// followed, no FIFO opened, no huge file parsed, no directory entered.
	r = runWithin(t, hostileTimeout, "schema", q)
	if r.code != 0 {
		t.Errorf("schema: want exit 0, got\n%s", r)
	} else {
		recs, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
		var fields []string
		for _, rec := range recs[min(1, len(recs)):] {
			fields = append(fields, rec[0])
		}
		slices.Sort(fields)
		if want := []string{"amount", "msg_id", "order_no", "seq"}; err != nil || !slices.Equal(fields, want) {
			t.Errorf("schema of the hostile inbox: fields %q (err %v), want %q\n%s", fields, err, want, r.stdout)
		}
	}

	r = runWithin(t, hostileTimeout, "consume", q)
	if r.code != 0 {
		t.Fatalf("consume: want exit 0, got\n%s", r)
	}
	want := consumeStats{Processed: len(c.valid), DeadLetters: c.count(errorStage)}
	if st := parseStats(t, r); st != want {
		t.Errorf("consume summary %+v, want %+v", st, want)
	}

	checkFinal(t, q, c)

	// The non-messages are untouched: same inode, content and times.
	after := leftovers()
	for name, b := range before {
		a, ok := after[name]
		if !ok {
			t.Errorf("inbox/%q was moved away; it is not a message", name)
			continue
		}
		if a.Ino != b.Ino || a.Content != b.Content || a.MTime != b.MTime || a.Mode != b.Mode {
			t.Errorf("inbox/%q was changed: %+v -> %+v", name, b, a)
		}
	}
	if len(after) != len(before) {
		t.Errorf("inbox/ holds %d non-message entries after consume, had %d", len(after), len(before))
	}

	// The dead-lettered directory keeps its inside; the FIFO and the link
	// to /dev/zero are still what they were.
	if b, err := os.ReadFile(filepath.Join(q, errorStage, "d.json", "inside.json")); err != nil || !bytes.Contains(b, []byte(`"inside"`)) {
		t.Errorf("error/d.json/inside.json: %v %q", err, b)
	}
	if target, err := os.Readlink(filepath.Join(q, errorStage, "zero.json")); err != nil || target != "/dev/zero" {
		t.Errorf("error/zero.json: want a symlink to /dev/zero, got %q %v", target, err)
	}
	if fi, err := os.Lstat(filepath.Join(q, errorStage, "f.json")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("error/f.json: want the FIFO, got %v %v", fi, err)
	}
	// Everything in error/ is there under its own name (error/ was empty).
	for _, g := range c.files {
		if g.Stage == errorStage {
			if _, err := os.Lstat(filepath.Join(q, errorStage, g.Name)); err != nil {
				t.Errorf("error/%q: %v", g.Name, err)
			}
		}
	}
	if r := runWithin(t, hostileTimeout, "status", q); r.code != 0 {
		t.Errorf("status: want exit 0, got\n%s", r)
	}
}

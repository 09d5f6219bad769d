//go:build linux

package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeyLimits: the limits of the message contract (spool.MaxKeyLen,
// spool.MaxAmountLen, lone surrogates) are the same on every ledger
// engine and are dead letters, never a failed batch. Among 1 000 messages
// sit a msg_id of 3 000 random bytes (which PostgreSQL cannot index, nor
// compress), an order key as long, two msg_ids that differ only in a lone
// surrogate escape, an amount of 70 001 digits (MariaDB's column holds
// 65 535 bytes) and a name of 70 000 bytes given twice (MariaDB's column
// for the field holds 65 535): each is an invalid-field dead letter
// naming its field and the limit, and the other messages are processed,
// among them one whose msg_id and order key are exactly 1 024 random
// bytes. consume exits 0 and fsck finds nothing. With --post, the same
// goes through the reservations, and the server sees each valid msg_id
// once and no other.
func TestKeyLimits(t *testing.T) {
	t.Parallel()
	for _, e := range ledgerEngines() {
		for _, post := range []bool{false, true} {
			name := e.name
			if post {
				name += "-post"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				checkKeyLimits(t, e.dsn(t), post)
			})
		}
	}
}

// keyLimitCase is a message of TestKeyLimits that must be a dead letter.
type keyLimitCase struct {
	name, body    string
	field, detail string // the dead letter's field, and a part of its detail
}

func checkKeyLimits(t *testing.T, dsn string, post bool) {
	const total = 1000
	rng := newRand(t)
	random := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return base64.RawURLEncoding.EncodeToString(b)[:n]
	}
	lone := "must not contain a lone surrogate escape (no character, decoded as U+FFFD), found "
	longName := strings.Repeat("n", 70000)
	bad := []keyLimitCase{
		{"long-id", orderMessage(random(3000), "O", 1, "1.00"), "msg_id", "must be at most 1024 bytes, found 3000 bytes"},
		{"long-order", orderMessage("long-order", random(3000), 1, "1.00"), "order_no", "must be at most 1024 bytes, found 3000 bytes"},
		{"lone-high", orderMessage(`k\ud800`, "O", 1, "1.00"), "msg_id", lone + `\ud800 at offset 12`},
		{"lone-other", orderMessage(`k\udbff`, "O", 1, "1.00"), "msg_id", lone + `\udbff at offset 12`},
		{"long-amount", orderMessage("long-amount", "O", 1, "1"+strings.Repeat("0", 70000)), "amount", "must be at most 1024 bytes, found 70001 bytes"},
		{"long-name", `{"msg_id":"long-name","` + longName + `":1,"` + longName + `":2}`, longName[:1024] + "...", "duplicate key (a name of 70000 bytes, cut short here)"},
	}
	atLimit, orderAtLimit := random(1024), random(1024)

	q := filepath.Join(t.TempDir(), "q")
	db := func(args ...string) []string {
		if dsn != "" {
			args = append(args, "--db", dsn)
		}
		return args
	}
	mustRun(t, 0, db("init", q)...)
	files := make([]string, total)
	want := map[string]keyLimitCase{}
	for i, pos := range rng.Perm(total)[:len(bad)] {
		files[pos] = bad[i].body
		want[fmt.Sprintf("f%04d.json", pos)] = bad[i]
	}
	var valid []string
	for pos := range files {
		if files[pos] != "" {
			continue
		}
		id := fmt.Sprintf("m%04d", pos)
		order := "O"
		if len(valid) == total/2 {
			id, order = atLimit, orderAtLimit
		}
		files[pos] = orderMessage(id, order, 1, "1.00")
		valid = append(valid, id)
	}
	for pos, body := range files {
		putMessage(t, q, fmt.Sprintf("f%04d.json", pos), body)
	}

	args := db("consume", q)
	var srv *callServer
	if post {
		srv = newCallServer(t, 0)
		args = append(args, "--post", srv.URL)
	}
	r := mustRun(t, 0, args...)
	if st := parseStats(t, r); st != (consumeStats{Processed: len(valid), DeadLetters: len(bad)}) {
		t.Fatalf("stats %+v, want %d processed and %d dead letters\n%s", st, len(valid), len(bad), r)
	}

	var dead []struct {
		File, Reason, Field, Detail string
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, db("errors", q, "--json")...).stdout), &dead); err != nil {
		t.Fatal(err)
	}
	if len(dead) != len(bad) {
		t.Errorf("%d dead letters, want %d", len(dead), len(bad))
	}
	for _, d := range dead {
		w, ok := want[d.File]
		if !ok {
			t.Errorf("%s is a dead letter (%s: %s)", d.File, d.Reason, d.Detail)
			continue
		}
		if d.Reason != "invalid-field" || d.Field != w.field || !strings.Contains(d.Detail, w.detail) {
			t.Errorf("%s (%s): %s %.40q %q, want invalid-field %.40q with %q", d.File, w.name, d.Reason, d.Field, d.Detail, w.field, w.detail)
		}
	}
	if n := len(names(t, q, done)); n != len(valid) {
		t.Errorf("done/ holds %d files, want %d", n, len(valid))
	}
	if n := len(names(t, q, inbox)); n != 0 {
		t.Errorf("inbox/ holds %d files, want none", n)
	}
	if post {
		seen, _ := srv.seen(t)
		for _, id := range valid {
			if seen[id] != 1 {
				t.Errorf("msg_id %.20q...: %d requests, want 1", id, seen[id])
			}
		}
		if len(seen) != len(valid) {
			t.Errorf("the server saw %d msg_ids, want the %d valid ones", len(seen), len(valid))
		}
	}
	rep := fsck(t, 0, q, db()...)
	for _, f := range rep.Findings {
		if !f.Info {
			t.Errorf("fsck: %s", f.Text)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/spoolq/spool"
)

// put writes a message into inbox/ under a hidden name, then renames it
// in, as a producer must.
func put(t *testing.T, dir, name, body string) {
	t.Helper()
	tmp := filepath.Join(dir, "inbox", "."+name)
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "inbox", name)); err != nil {
		t.Fatal(err)
	}
}

func drain(t *testing.T, dir string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), dir, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestOrderBalance runs the program on a temporary queue: payments are
// booked once each, whatever the redeliveries; a payment that would take
// its order below zero, a fraction of a cent and a broken file are dead
// letters; nothing of a dead letter reaches the balances.
func TestOrderBalance(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	// The first run creates the queue.
	if got, want := drain(t, dir), "processed=0 duplicates=0 dead-letters=0 retries=0\n"; got != want {
		t.Fatalf("empty queue:\n%s\nwant:\n%s", got, want)
	}
	for name, body := range map[string]string{
		"1.json":        `{"msg_id":"1","order_no":"O1","seq":1,"amount":"10.00"}`,
		"1-resend.json": `{"msg_id":"1","order_no":"O1","seq":1,"amount":"10.00"}`,
		"2.json":        `{"msg_id":"2","order_no":"O1","seq":2,"amount":5.50}`,
		"3.json":        `{"msg_id":"3","order_no":"O1","seq":3,"amount":"-20.00"}`, // below zero in any order
		"4.json":        `{"msg_id":"4","order_no":"O2","seq":1,"amount":"1e3"}`,
		"5.json":        `{"msg_id":"5","order_no":"O2","seq":2,"amount":"0.005"}`,
		"6.json":        `{"msg_id":"6","order_no":"O2",`,
	} {
		put(t, dir, name, body)
	}
	want := "processed=3 duplicates=1 dead-letters=3 retries=0\nO1 15.50 (2 payments)\nO2 1000.00 (1 payments)\n"
	if got := drain(t, dir); got != want {
		t.Errorf("first drain:\n%s\nwant:\n%s", got, want)
	}
	// A redelivery in a later run changes nothing.
	put(t, dir, "2-again.json", `{"msg_id":"2","order_no":"O1","seq":2,"amount":5.50}`)
	want = "processed=0 duplicates=1 dead-letters=0 retries=0\nO1 15.50 (2 payments)\nO2 1000.00 (1 payments)\n"
	if got := drain(t, dir); got != want {
		t.Errorf("second drain:\n%s\nwant:\n%s", got, want)
	}

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "ledger.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT file, reason, detail FROM deliveries WHERE outcome = 'dead-letter' ORDER BY file`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var file, reason, detail string
		if err := rows.Scan(&file, &reason, &detail); err != nil {
			t.Fatal(err)
		}
		got = append(got, file+" "+reason+" "+detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// The balance 3.json met depends on the order the payments ran in.
	if len(got) != 3 ||
		!strings.HasPrefix(got[0], "3.json handler order O1: balance ") || !strings.HasSuffix(got[0], " cannot pay -20.00") ||
		got[1] != "5.json handler amount 0.005: not a whole number of cents" ||
		!strings.HasPrefix(got[2], "6.json parse ") {
		t.Errorf("dead letters:\n%q\nwant 3.json (below zero), 5.json (a fraction of a cent), 6.json (parse)", got)
	}
}

func TestToCents(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"12.50", 1250, true}, {"-3", -300, true}, {"1e3", 100000, true}, {"0.10", 10, true},
		{"12345678901234.56", 1234567890123456, false}, {"0.001", 0, false}, {"x", 0, false},
	} {
		got, err := toCents(spool.Amount(tt.in))
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("toCents(%s) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

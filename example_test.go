package spool_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spoolq/spool"
	// The SQLite backend, for the ledger file, registered by its import.
	_ "github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
)

// A handler marks what retrying cannot fix; every other error is retried.
// The mark survives wrapping.
func ExamplePermanent() {
	err := spool.Permanent(fmt.Errorf("order %s is closed", "O-7"))
	fmt.Println(spool.IsPermanent(err), err)
	fmt.Println(spool.IsPermanent(fmt.Errorf("book payment: %w", err)))
	fmt.Println(spool.IsPermanent(errors.New("connection reset")))
	fmt.Println(spool.Permanent(nil) == nil)
	// Output:
	// true order O-7 is closed
	// true
	// false
	// true
}

// Without jitter the delays double from Base up to Cap; a RetryAfterError
// (an HTTP Retry-After) asks for a longer wait, granted up to Cap.
func ExampleRetry_Delay() {
	r := spool.Retry{Base: time.Second, Cap: 10 * time.Second, MaxAttempts: 6, NoJitter: true}
	for attempt := 1; attempt <= 5; attempt++ {
		fmt.Printf("after attempt %d: wait %v, exhausted %v\n", attempt, r.Delay(attempt, nil), r.Exhausted(attempt))
	}
	busy := &spool.RetryAfterError{Err: errors.New("503 Service Unavailable"), After: 30 * time.Second}
	fmt.Println("with Retry-After: 30:", r.Delay(1, busy))
	busy.After = 5 * time.Second
	fmt.Println("with Retry-After: 5:", r.Delay(1, busy))
	fmt.Println("after attempt 6: exhausted", r.Exhausted(6))
	// Output:
	// after attempt 1: wait 1s, exhausted false
	// after attempt 2: wait 2s, exhausted false
	// after attempt 3: wait 4s, exhausted false
	// after attempt 4: wait 8s, exhausted false
	// after attempt 5: wait 10s, exhausted false
	// with Retry-After: 30: 10s
	// with Retry-After: 5: 5s
	// after attempt 6: exhausted true
}

// A contract names the fields of a queue's messages: here a producer's own
// names, with the account required. Parse validates raw bytes into a
// Message, the amount kept exactly as written, or says with a RejectError
// why the message can never be processed (the consumer dead-letters it
// with that reason).
func ExampleContract_Parse() {
	c := spool.Contract{KeyField: "event_id", OrderField: "account", SeqField: "n", AmountField: "value",
		Required: []string{"event_id", "account"}}
	m, err := c.Parse([]byte(`{"event_id": "e-1", "account": "A-7", "n": 3, "value": 0.10, "note": "kept"}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(m.MsgID, m.OrderNo, m.Seq, m.Amount)

	for _, bad := range []string{`{"event_id": "e-2"}`, `{"event_id": "e-3", "account": "A-7", "n": 0}`, `{"event_id": `} {
		_, err := c.Parse([]byte(bad))
		var rej *spool.RejectError
		if errors.As(err, &rej) {
			fmt.Printf("%s (%s)\n", rej.Reason, rej.Field)
		}
	}
	// Output:
	// e-1 A-7 3 0.10
	// missing-field (account)
	// invalid-field (n)
	// parse ()
}

// A consumer with a handler that writes through the ledger's transaction:
// a payment row commits with its message's processed row, or not at all.
// The duplicate never reaches the handler; the refund is refused for good
// (a dead letter, reason handler), like the file that is not JSON. Drain
// returns once inbox/ is empty.
func ExampleConsumer_Drain() {
	root, err := os.MkdirTemp("", "spool-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	if err := queue.Init(root); err != nil {
		panic(err)
	}
	// The queue with its ledger (root/ledger.db), checked to belong
	// together, and made ready as spool consume does before it claims.
	ctx := context.Background()
	q, err := queueopen.Open(ctx, root, queueopen.Options{Use: queueopen.Consume})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	dir, l := q.Dir, q.Ledger
	if _, err := l.SQL().ExecContext(ctx, `CREATE TABLE payments (
    msg_id TEXT NOT NULL PRIMARY KEY, order_no TEXT NOT NULL, amount TEXT NOT NULL)`); err != nil {
		panic(err)
	}
	for name, body := range map[string]string{
		"a.json":        `{"msg_id":"m1","order_no":"A","seq":1,"amount":"10.00"}`,
		"a-resend.json": `{"msg_id":"m1","order_no":"A","seq":1,"amount":"10.00"}`,
		"b.json":        `{"msg_id":"m2","order_no":"A","seq":2,"amount":0.10}`,
		"c.json":        `{"msg_id":"m3","order_no":"A","seq":3,"amount":"-5.00"}`,
		"d.json":        `not json`,
	} {
		if _, err := dir.WriteFile(queue.Inbox, name, []byte(body)); err != nil {
			panic(err)
		}
	}

	pay := spool.HandlerFunc(func(ctx context.Context, tx *sql.Tx, d *spool.Delivery) error {
		m := d.Message
		if strings.HasPrefix(string(m.Amount), "-") {
			return spool.Permanent(fmt.Errorf("order %s: refunds are not booked here", m.OrderNo))
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO payments (msg_id, order_no, amount) VALUES (?, ?, ?)`,
			m.MsgID, m.OrderNo, string(m.Amount))
		return err // transient: retried with backoff
	})
	c, err := spool.NewConsumer(dir, l.Consumer(), spool.Config{Handler: pay})
	if err != nil {
		panic(err)
	}
	st, err := c.Drain(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("processed=%d duplicates=%d dead-letters=%d\n", st.Processed, st.Duplicates, st.DeadLetters)

	rows, err := l.SQL().QueryContext(ctx, `SELECT msg_id, amount FROM payments ORDER BY msg_id`)
	if err != nil {
		panic(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, amount string
		if err := rows.Scan(&id, &amount); err != nil {
			panic(err)
		}
		fmt.Println(id, amount)
	}
	// Output:
	// processed=2 duplicates=1 dead-letters=2
	// m1 10.00
	// m2 0.10
}

// A consumer with a Caller, whose effect is outside the ledger (here a
// map standing for a remote service): it is called outside any
// transaction, up to Config.Concurrency calls at once (zero: the default,
// 4), each msg_id reserved in the ledger first, so a redelivery is never
// called while the first delivery's call is in flight, and becomes a
// duplicate once it succeeded.
func ExampleCaller() {
	root, err := os.MkdirTemp("", "spool-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	if err := queue.Init(root); err != nil {
		panic(err)
	}
	// The queue with its ledger (root/ledger.db), checked to belong
	// together, and made ready as spool consume does before it claims.
	ctx := context.Background()
	q, err := queueopen.Open(ctx, root, queueopen.Options{Use: queueopen.Consume})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	dir, l := q.Dir, q.Ledger
	for name, body := range map[string]string{
		"a.json":        `{"msg_id":"m1","order_no":"A","seq":1,"amount":"10.00"}`,
		"a-resend.json": `{"msg_id":"m1","order_no":"A","seq":1,"amount":"10.00"}`,
		"b.json":        `{"msg_id":"m2","order_no":"A","seq":2,"amount":"2.50"}`,
	} {
		if _, err := dir.WriteFile(queue.Inbox, name, []byte(body)); err != nil {
			panic(err)
		}
	}
	var mu sync.Mutex
	booked := map[string]int{}
	book := spool.CallerFunc(func(ctx context.Context, d *spool.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		booked[d.Message.MsgID]++ // a real service would dedupe on the msg_id too
		return nil
	})
	c, err := spool.NewConsumer(dir, l.Consumer(), spool.Config{Caller: book})
	if err != nil {
		panic(err)
	}
	st, err := c.Drain(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("processed=%d duplicates=%d\n", st.Processed, st.Duplicates)
	fmt.Println("calls:", booked["m1"], booked["m2"])
	// Output:
	// processed=2 duplicates=1
	// calls: 1 1
}

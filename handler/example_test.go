package handler_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/handler"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
)

// delivery is a valid message as a consumer hands it to a handler.
func delivery(file, body string) *spool.Delivery {
	m, err := spool.DefaultContract().Parse([]byte(body))
	if err != nil {
		panic(err)
	}
	return &spool.Delivery{Claim: "example:" + file, File: file, Message: m}
}

// A command's exit status says what became of the message: 0 done, 75
// (ExitTempFail) try again later, anything else a dead letter, with the end
// of its stderr as the reason.
func ExampleExec() {
	h := &handler.Exec{
		Command: `if [ "$SPOOL_AMOUNT" = "0.00" ]; then echo "nothing to book for $SPOOL_ORDER_NO" >&2; exit 3; fi
cat >/dev/null; echo "booked $SPOOL_MSG_ID from $SPOOL_FILE" >&2; exit 75`,
		Timeout: 10 * time.Second,
		Queue:   "/var/spool/orders",
	}
	ctx := context.Background()
	for _, d := range []*spool.Delivery{
		delivery("a.json", `{"msg_id":"m1","order_no":"A","seq":1,"amount":"0.00"}`),
		delivery("b.json", `{"msg_id":"m2","order_no":"A","seq":2,"amount":"9.99"}`),
	} {
		err := h.Call(ctx, d)
		fmt.Printf("%s: permanent %v: %v\n", d.File, spool.IsPermanent(err), err)
	}
	// Output:
	// a.json: permanent true: exec: exit status 3: nothing to book for A
	// b.json: permanent false: exec: exit status 75 (temporary failure): booked m2 from b.json
}

// A server that is busy says when to come back; the consumer's retry policy
// waits at least that long (spool.Retry.Delay). A client error is for good.
func ExamplePost() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") == "m1" {
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprint(w, `{"error":"unknown order"}`)
	}))
	defer srv.Close()
	h, err := handler.NewPost(srv.URL+"/orders", handler.PostOptions{Timeout: 5 * time.Second, MaxRetryAfter: time.Minute})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, d := range []*spool.Delivery{
		delivery("a.json", `{"msg_id":"m1","order_no":"A","seq":1,"amount":"1.00"}`),
		delivery("b.json", `{"msg_id":"m2","order_no":"B","seq":1,"amount":"1.00"}`),
	} {
		err := h.Call(ctx, d)
		var ra *spool.RetryAfterError
		if errors.As(err, &ra) {
			fmt.Printf("%s: retry after %v: %v\n", d.File, ra.After, err)
			continue
		}
		fmt.Printf("%s: permanent %v: %v\n", d.File, spool.IsPermanent(err), err)
	}
	// Output:
	// a.json: retry after 1m0s: post: 503 Service Unavailable
	// b.json: permanent true: post: 422 Unprocessable Entity: {"error":"unknown order"}
}

// A consumer whose handler is a SQL file: each message's statements commit
// with its processed row, so the balance counts every msg_id once, the
// resent file included; the payment that breaks a CHECK constraint is a
// dead letter and leaves no trace in the balances.
func ExampleSQL() {
	root, err := os.MkdirTemp("", "spool-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	if err := queue.Init(root); err != nil {
		panic(err)
	}
	dir, err := queue.Open(root)
	if err != nil {
		panic(err)
	}
	defer dir.Close()
	ctx := context.Background()
	l, err := sqlite.Open(ctx, filepath.Join(root, "ledger.db"))
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for name, body := range map[string]string{
		"a.json":        `{"msg_id":"m1","order_no":"A","seq":1,"amount":"10.00"}`,
		"a-resend.json": `{"msg_id":"m1","order_no":"A","seq":1,"amount":"10.00"}`,
		"b.json":        `{"msg_id":"m2","order_no":"A","seq":2,"amount":"2.50"}`,
		"c.json":        `{"msg_id":"m3","order_no":"A","seq":3,"amount":"-99.00"}`,
	} {
		if _, err := dir.WriteFile(queue.Inbox, name, []byte(body)); err != nil {
			panic(err)
		}
	}

	script, err := handler.ParseSQL(`
CREATE TABLE IF NOT EXISTS balances (
    order_no TEXT PRIMARY KEY,
    cents    INTEGER NOT NULL CHECK (cents >= 0),
    last     TEXT NOT NULL
);
INSERT INTO balances (order_no, cents, last)
VALUES (:order_no, CAST(ROUND(:amount * 100) AS INTEGER), :file)
ON CONFLICT (order_no) DO UPDATE SET cents = cents + excluded.cents, last = excluded.last;
`)
	if err != nil {
		panic(err)
	}
	h, err := handler.NewSQL(ctx, l, script, handler.SQLOptions{})
	if err != nil {
		panic(err)
	}
	c, err := spool.NewConsumer(dir, l.Consumer(), spool.Config{Handler: h})
	if err != nil {
		panic(err)
	}
	st, err := c.Drain(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("processed=%d duplicates=%d dead-letters=%d\n", st.Processed, st.Duplicates, st.DeadLetters)
	var cents int
	var last string
	if err := l.SQL().QueryRowContext(ctx, `SELECT cents, last FROM balances WHERE order_no = 'A'`).Scan(&cents, &last); err != nil {
		panic(err)
	}
	fmt.Println("A:", cents, "cents, last from", last)
	// Output:
	// processed=2 duplicates=1 dead-letters=1
	// A: 1250 cents, last from b.json
}

// A notifier runs its command for each dead letter a consumer hands it
// through OnDelivery, and ignores the other outcomes.
func ExampleNotifier() {
	notes, err := os.CreateTemp("", "spool-notes")
	if err != nil {
		panic(err)
	}
	defer os.Remove(notes.Name())
	notes.Close()
	n := handler.NewNotifier(handler.NotifierOptions{
		Command: `printf '%s %s: %s\n' "$SPOOL_FILE" "$SPOOL_REASON" "$SPOOL_DETAIL" >> ` + notes.Name(),
		Queue:   "/var/spool/orders",
		OnError: func(err error) { fmt.Println(err) },
	})
	// As a consumer would: spool.Config{OnDelivery: n.Deliver}.
	bad := &spool.Delivery{File: "x.json", Reject: &spool.RejectError{Reason: spool.ReasonParse, Detail: "not JSON"}}
	n.Deliver(bad, spool.Result{Outcome: spool.OutcomeDeadLetter, Reject: bad.Reject}, "x~2.json")
	n.Deliver(delivery("a.json", `{"msg_id":"m1","order_no":"A","seq":1,"amount":"1.00"}`), spool.Result{Outcome: spool.OutcomeProcessed}, "a.json")
	if err := n.Close(10 * time.Second); err != nil {
		panic(err)
	}
	out, err := os.ReadFile(notes.Name())
	if err != nil {
		panic(err)
	}
	fmt.Print(strings.TrimPrefix(string(out), "\n"))
	// Output:
	// x~2.json parse: not JSON
}

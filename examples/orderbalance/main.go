// Command orderbalance consumes a spool queue with business work of its
// own: it keeps the balance of every order in a table of the ledger,
// written through the transaction that records each message. A payment
// and its processed row commit together or not at all, a redelivered
// payment is absorbed by the ledger before the handler ever sees it, and a
// payment that would take an order below zero is dead-lettered at once
// (spool.Permanent) instead of being retried.
//
// Usage:
//
//	go run ./examples/orderbalance DIR
//
// DIR is a queue directory (created if needed); its ledger is DIR/ledger.db,
// the one the spool command uses, so `spool status DIR` and `spool errors
// DIR` show what this program did.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"os"
	"time"

	"github.com/spoolq/spool"
	// The SQLite backend, for the ledger file, registered by its import.
	_ "github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: orderbalance DIR")
		os.Exit(2)
	}
	if err := run(context.Background(), os.Args[1], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "orderbalance:", err)
		os.Exit(1)
	}
}

// schema is the business table. Money is kept in integer cents: the
// message's amount is exact decimal text, and converting it through
// float64 would round it.
const schema = `CREATE TABLE IF NOT EXISTS balances (
    order_no TEXT    NOT NULL PRIMARY KEY,
    cents    INTEGER NOT NULL,
    payments INTEGER NOT NULL
)`

// run drains the queue at dir, then prints what it did and every balance.
func run(ctx context.Context, dir string, stdout, stderr io.Writer) (err error) {
	if err := queue.Init(dir); err != nil {
		return fmt.Errorf("init queue: %w", err)
	}
	// One call opens the queue with its ledger, DIR/ledger.db, and does
	// what spool consume does before it claims: the contract is read from
	// DIR/spool.conf, strictly, and held among the consumers running beside
	// this one (another contract there is refused); the ledger must be
	// this queue's (a deleted or another queue's ledger would process old
	// messages again); and a spool replay killed half-way is finished, so
	// that none of its files is consumed unrecorded.
	q, err := queueopen.Open(ctx, dir, queueopen.Options{Use: queueopen.Consume})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, q.Close()) }()
	l := q.Ledger
	if _, err := l.SQL().ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("create balances: %w", err)
	}

	c, err := q.Consumer(spool.Config{
		Handler: spool.HandlerFunc(book),
		// A transient failure (the database busy) is retried after at most
		// 100ms, 200ms, 400ms...; the fifth failure is a dead letter.
		Retry:  spool.Retry{Base: 100 * time.Millisecond, Cap: 5 * time.Second, MaxAttempts: 5},
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	st, err := c.Drain(ctx)
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	fmt.Fprintf(stdout, "processed=%d duplicates=%d dead-letters=%d retries=%d\n",
		st.Processed, st.Duplicates, st.DeadLetters, st.Retries)
	return printBalances(ctx, l.SQL(), stdout)
}

// book is the handler: it adds the payment to its order's balance, in the
// ledger's transaction tx. It returns a permanent error for a payment that
// can never be booked; any other error (the database busy) is transient,
// and the message is tried again later.
func book(ctx context.Context, tx *sql.Tx, d *spool.Delivery) error {
	m := d.Message
	cents, err := toCents(m.Amount)
	if err != nil {
		return spool.Permanent(fmt.Errorf("amount %s: %w", m.Amount, err))
	}
	var balance int64
	err = tx.QueryRowContext(ctx, `SELECT cents FROM balances WHERE order_no = ?`, m.OrderNo).Scan(&balance)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read balance of %s: %w", m.OrderNo, err)
	}
	if balance+cents < 0 {
		return spool.Permanent(fmt.Errorf("order %s: balance %s cannot pay %s", m.OrderNo, formatCents(balance), m.Amount))
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO balances (order_no, cents, payments) VALUES (?, ?, 1)
ON CONFLICT (order_no) DO UPDATE SET cents = cents + excluded.cents, payments = payments + 1`, m.OrderNo, cents)
	if err != nil {
		return fmt.Errorf("book %s on %s: %w", m.Amount, m.OrderNo, err)
	}
	return nil
}

// maxCents bounds an amount, so that sums stay far from int64's limits.
const maxCents = 1e15

// toCents converts an exact decimal amount ("12.50", "-3", "1e3") to
// cents, refusing fractions of a cent.
func toCents(a spool.Amount) (int64, error) {
	r, ok := new(big.Rat).SetString(string(a))
	if !ok {
		return 0, errors.New("not a decimal number")
	}
	r.Mul(r, big.NewRat(100, 1))
	if !r.IsInt() {
		return 0, errors.New("not a whole number of cents")
	}
	n := r.Num()
	if n.CmpAbs(big.NewInt(maxCents)) > 0 {
		return 0, errors.New("out of range")
	}
	return n.Int64(), nil
}

// formatCents prints cents as a decimal amount: -1050 is -10.50.
func formatCents(c int64) string {
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Sprintf("%s%d.%02d", sign, c/100, c%100)
}

func printBalances(ctx context.Context, db *sql.DB, w io.Writer) error {
	rows, err := db.QueryContext(ctx, `SELECT order_no, cents, payments FROM balances ORDER BY order_no`)
	if err != nil {
		return fmt.Errorf("read balances: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var order string
		var cents, payments int64
		if err := rows.Scan(&order, &cents, &payments); err != nil {
			return fmt.Errorf("read balances: %w", err)
		}
		fmt.Fprintf(w, "%s %s (%d payments)\n", order, formatCents(cents), payments)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read balances: %w", err)
	}
	return nil
}

// Command embed consumes a queue beside spool consume, under its rules.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	"github.com/spoolq/spool"
	_ "github.com/spoolq/spool/ledger/sqlite" // the ledger file's backend
	"github.com/spoolq/spool/queueopen"
)

func main() {
	ctx := context.Background()
	q, err := queueopen.Open(ctx, os.Args[1], queueopen.Options{Use: queueopen.Consume})
	if err == nil {
		var c *spool.Consumer
		if c, err = q.Consumer(spool.Config{Handler: spool.HandlerFunc(book)}); err == nil {
			_, err = c.Drain(ctx)
		}
		err = errors.Join(err, q.Close())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

// book is the business work, in the ledger's transaction tx.
func book(ctx context.Context, tx *sql.Tx, d *spool.Delivery) error {
	_, err := fmt.Println("booked", d.Message.MsgID)
	return err
}

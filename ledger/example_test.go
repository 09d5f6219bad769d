package ledger_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/sqlite"
)

// Three deliveries of order A: seq 1, seq 3, and seq 1 again under a new
// msg_id. The order check finds seq 1 twice and seq 2 missing.
func ExampleMessages_OrderCheck() {
	dir, err := os.MkdirTemp("", "ledger-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	var db *ledger.DB // the embedded backend; a PostgreSQL one behaves the same
	db, err = sqlite.Open(ctx, filepath.Join(dir, "ledger.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()

	var batch []*spool.Delivery
	for i, seq := range []int64{1, 3, 1} {
		id := fmt.Sprint("m", i)
		batch = append(batch, &spool.Delivery{
			Claim: "claim-" + id, File: id + ".json", Consumer: "example",
			Message: &spool.Message{MsgID: id, OrderNo: "A", Seq: seq, Amount: "9.99", Raw: []byte("{}")},
		})
	}
	if _, err := db.Consumer().Record(ctx, batch, spool.Work{}); err != nil {
		panic(err)
	}
	problems, err := db.Messages().OrderCheck(ctx)
	if err != nil {
		panic(err)
	}
	for _, p := range problems {
		fmt.Println(p.OrderNo, p.Seq, p.Problem)
	}
	// Output:
	// A 1 duplicate
	// A 2 missing
}

package postgres

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/spoolq/spool"
)

// benchDelivery is a valid delivery of msgID by session, as the bench's
// generated messages are.
func benchDelivery(claim, msgID, session string) *spool.Delivery {
	raw := `{"msg_id":` + strconv.Quote(msgID) + `,"order_no":"A","seq":1,"amount":"1.00"}`
	return &spool.Delivery{
		Claim: claim, File: msgID + ".json", Ino: 1, Consumer: session, Size: int64(len(raw)),
		Message: &spool.Message{MsgID: msgID, OrderNo: "A", Seq: 1, Amount: "1.00", Raw: []byte(raw)},
		At:      time.Now(),
	}
}

// BenchmarkRecordBatch records batches of 256 mixed as spool bench's queue
// is (a tenth redeliveries, one in a hundred poison), by a session that
// holds its lease, as a consumer on PostgreSQL does, so that each batch's
// transaction carries the fence too: the per-batch cost of a plain drain's
// ledger, with the server on this machine. Compare with the benchmark of
// the same name in ./ledger/sqlite.
//
//	go test -run '^$' -bench RecordBatch -benchtime 200x -count 3 ./ledger/postgres
func BenchmarkRecordBatch(b *testing.B) {
	const size, session = 256, "bench-session"
	db, err := Open(context.Background(), freshSchema(b))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := db.Consumer().AcquireSessionLease(ctx, session, time.Hour); err != nil {
		b.Fatal(err)
	}
	n := 0
	for b.Loop() {
		batch := make([]*spool.Delivery, size)
		for i := range batch {
			id := strconv.Itoa(n)
			switch {
			case n%100 == 42:
				batch[i] = &spool.Delivery{Claim: "c" + id, File: id + ".json", Consumer: session, At: time.Now(),
					Reject: &spool.RejectError{Reason: spool.ReasonParse, Detail: "bench"}}
			case n%10 == 7:
				batch[i] = benchDelivery("c"+id, "m"+strconv.Itoa(n-5), session) // a redelivery
			default:
				batch[i] = benchDelivery("c"+id, "m"+id, session)
			}
			n++
		}
		if _, err := db.Consumer().Record(ctx, batch, spool.Work{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkRecordWorkBatch records batches of 256 new messages with a
// handler of one INSERT in the transaction, as consume --sql does: the
// per-batch cost of the handler path (a savepoint, the processed row, the
// handler, the release with the session's reset, SessionReset, and the
// attempts' delete, per message).
//
//	go test -run '^$' -bench RecordWorkBatch -benchtime 50x -count 3 ./ledger/postgres
func BenchmarkRecordWorkBatch(b *testing.B) {
	const size, session = 256, "bench-session"
	db, err := Open(context.Background(), freshSchema(b))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.SQL().ExecContext(ctx, `CREATE TABLE lines (msg_id TEXT PRIMARY KEY, amount NUMERIC)`); err != nil {
		b.Fatal(err)
	}
	if err := db.Consumer().AcquireSessionLease(ctx, session, time.Hour); err != nil {
		b.Fatal(err)
	}
	work := spool.Work{Decide: spool.Retry{}.Decide, Handler: spool.HandlerFunc(func(ctx context.Context, tx *sql.Tx, d *spool.Delivery) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO lines (msg_id, amount) VALUES ($1, CAST($2 AS NUMERIC))`, d.Message.MsgID, string(d.Message.Amount))
		return err
	})}
	n := 0
	for b.Loop() {
		batch := make([]*spool.Delivery, size)
		for i := range batch {
			id := strconv.Itoa(n)
			batch[i] = benchDelivery("c"+id, "m"+id, session)
			n++
		}
		if _, err := db.Consumer().Record(ctx, batch, work); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
}

package bench

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spoolq/spool/batch"
	"github.com/spoolq/spool/internal/sample"
	"github.com/spoolq/spool/queue"
)

// csvFields are the columns of a generated CSV batch file: the generated
// message's fields, its customer flattened.
var csvFields = []string{"msg_id", "order_no", "seq", "event_type", "amount", "currency", "customer_id", "created_at"}

// generateBatch writes n generated messages as the records of one batch
// file of format kind (batch.JSONL or batch.CSV) in a new queue's inbox,
// with the same redeliveries and poison as a file a message: a poison
// record stays poison (a line cut short, a missing amount, a seq of 0;
// in CSV, the cut line has too few fields).
func generateBatch(dir string, n int, o sample.Options, kind string) (sample.Expected, error) {
	if kind != batch.JSONL && kind != batch.CSV {
		return sample.Expected{}, fmt.Errorf("bench: format %q: want %s or %s", kind, batch.JSONL, batch.CSV)
	}
	if err := queue.Init(dir); err != nil {
		return sample.Expected{}, err
	}
	path := filepath.Join(dir, string(queue.Inbox), "bench."+kind)
	f, err := os.Create(path)
	if err != nil {
		return sample.Expected{}, fmt.Errorf("bench: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	cw := csv.NewWriter(w)
	if kind == batch.CSV {
		if err := cw.Write(csvFields); err != nil {
			return sample.Expected{}, fmt.Errorf("bench: %w", err)
		}
	}
	exp, err := sample.Generate(n, o, func(m sample.File) error {
		line := bytes.TrimRight(m.Data, "\n")
		if kind == batch.JSONL {
			_, err := w.Write(append(line, '\n'))
			return err
		}
		var v struct {
			MsgID     string              `json:"msg_id"`
			OrderNo   string              `json:"order_no"`
			Seq       json.Number         `json:"seq"`
			EventType string              `json:"event_type"`
			Amount    json.RawMessage     `json:"amount"`
			Currency  string              `json:"currency"`
			Customer  struct{ ID string } `json:"customer"`
			CreatedAt string              `json:"created_at"`
		}
		if err := json.Unmarshal(line, &v); err != nil {
			// The poison cut short: a row of too few fields.
			return cw.Write([]string{"cut", "short"})
		}
		amount := string(bytes.Trim(v.Amount, `"`))
		row := []string{v.MsgID, v.OrderNo, v.Seq.String(), v.EventType, amount, v.Currency, v.Customer.ID, v.CreatedAt}
		if v.Amount == nil {
			// The poison without an amount: an empty field is a missing one
			// only as JSON; in CSV it is text, so say so with too few fields.
			row = row[:4]
		}
		return cw.Write(row)
	})
	if err == nil {
		cw.Flush()
		err = cw.Error()
	}
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return exp, fmt.Errorf("bench: generate %s: %w", path, err)
	}
	return exp, nil
}

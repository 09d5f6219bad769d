// Package sample holds spool's built-in sample messages: the lab's small,
// hand-shaped queue (Lab) that `spool demo` and the command tests consume,
// and a deterministic generator of large queues (Generate) for benchmarks
// and load tests.
package sample

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strings"
)

// File is one message file: the name it gets in inbox/ and its content.
type File struct {
	Name string
	Data []byte
}

// The lab's expected outcomes, for tests and for the demo's explanation.
const (
	// LabMessages is the number of files Lab returns.
	LabMessages = 20
	// LabUnique is the number of distinct valid msg_ids: rows in processed.
	LabUnique = 15
	// LabDuplicates is the number of redeliveries of an already processed
	// msg_id with the same content under another file name.
	LabDuplicates = 3
	// LabDeadLetters is one unparseable file plus one without amount.
	LabDeadLetters = 2
)

// labEvent is one valid order event of the lab.
type labEvent struct {
	order    string
	seq      int
	event    string
	amount   string // JSON text, exactly as it is written into the file
	currency string
	customer string
	at       string
	extra    string // further members, JSON text starting with ','; may be empty
}

// labEvents are the 15 valid events over four orders, each order's seqs
// 1..n without gaps or repeats, so the order check says OK. Amounts show
// what exactness means: a number with a trailing zero (1999.90), an
// integer amount in won, a refund, and in one message a string amount that
// float64 cannot hold (12345678901234567.89).
var labEvents = []labEvent{
	{"ORD-1001", 1, "order.created", `1999.90`, "CNY", "C-20417", "2024-06-11T09:14:03+08:00", `,"items":[{"sku":"SKU-88121","qty":1,"price":1999.90}]`},
	{"ORD-1002", 1, "order.created", `1250000`, "KRW", "C-31009", "2024-06-11T10:02:47+09:00", `,"items":[{"sku":"SKU-40077","qty":2,"price":625000}]`},
	{"ORD-1001", 2, "order.paid", `1999.90`, "CNY", "C-20417", "2024-06-11T09:15:40+08:00", `,"payment":{"method":"alipay","ref":"AP-5521093"}`},
	{"ORD-1003", 1, "order.created", `"12345678901234567.89"`, "CNY", "C-00001", "2024-06-11T11:30:00+08:00", `,"items":[{"sku":"SKU-00001","qty":1,"price":"12345678901234567.89"}],"coupon":null`},
	{"ORD-1002", 2, "order.paid", `1250000`, "KRW", "C-31009", "2024-06-11T10:05:12+09:00", `,"payment":{"method":"card","ref":"KB-88310045"}`},
	{"ORD-1001", 3, "order.packed", `1999.90`, "CNY", "C-20417", "2024-06-11T13:40:19+08:00", `,"warehouse":"SHA-02"`},
	{"ORD-1004", 1, "order.created", `318.00`, "CNY", "C-77120", "2024-06-11T14:22:51+08:00", `,"items":[{"sku":"SKU-10230","qty":3,"price":106.00}],"coupon":"SUMMER24"`},
	{"ORD-1003", 2, "order.paid", `"12345678901234567.89"`, "CNY", "C-00001", "2024-06-11T11:31:09+08:00", `,"payment":{"method":"wire","ref":"WT-000042"}`},
	{"ORD-1002", 3, "order.shipped", `1250000`, "KRW", "C-31009", "2024-06-12T08:47:33+09:00", `,"carrier":"CJ","tracking":"6843-2210-9931"`},
	{"ORD-1001", 4, "order.shipped", `1999.90`, "CNY", "C-20417", "2024-06-12T07:05:44+08:00", `,"carrier":"SF","tracking":"SF1402297736511"`},
	{"ORD-1004", 2, "order.paid", `318.00`, "CNY", "C-77120", "2024-06-11T14:25:02+08:00", `,"payment":{"method":"wechat","ref":"WX-7730012"}`},
	{"ORD-1002", 4, "order.delivered", `1250000`, "KRW", "C-31009", "2024-06-13T15:20:05+09:00", `,"signed_by":"김민준"`},
	{"ORD-1004", 3, "order.refunded", `-106.00`, "CNY", "C-77120", "2024-06-14T10:11:27+08:00", `,"refund_of":"SKU-10230","partial":true`},
	{"ORD-1001", 5, "order.delivered", `1999.90`, "CNY", "C-20417", "2024-06-13T16:58:02+08:00", `,"signed_by":"王芳"`},
	{"ORD-1003", 3, "order.cancelled", `"-12345678901234567.89"`, "CNY", "C-00001", "2024-06-11T12:00:00+08:00", `,"partial":false`},
}

// labMsgID is the msg_id of the i-th valid event (0-based): EAI-style,
// ascending with i, so `spool dups` lists them in a readable order.
func labMsgID(i int) string { return fmt.Sprintf("EAI-20240611-%06d", 101+i) }

func (e labEvent) body(msgID string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"msg_id":%q,"order_no":%q,"seq":%d,"event_type":%q,"amount":%s,"currency":%q,"customer":{"id":%q},"created_at":%q%s}`,
		msgID, e.order, e.seq, e.event, e.amount, e.currency, e.customer, e.at, e.extra)
	b.WriteByte('\n')
	return []byte(b.String())
}

// Lab returns the lab's 20 messages in file-name order, the same on every
// call: 15 distinct valid msg_ids over orders ORD-1001 to ORD-1004, with
// every order's seqs complete from 1; 3 redeliveries of earlier messages
// (same msg_id, same bytes, another file name, as a producer that re-sent
// them would leave); 1 unparseable file (a truncated write); and 1 message
// without amount (missing-field).
//
// Consumed with the default contract it gives 15 processed rows, 3
// duplicates (EAI-20240611-000102, -000104 and -000111), dead letters
// 0019-ORD-1005-1.json (parse) and 0020-ORD-1005-2.json (missing-field),
// and an order check that says OK.
func Lab() []File {
	files := make([]File, 0, LabMessages)
	bodies := make([][]byte, len(labEvents))
	add := func(name string, data []byte) {
		files = append(files, File{Name: fmt.Sprintf("%04d-%s", len(files)+1, name), Data: data})
	}
	for i, e := range labEvents {
		bodies[i] = e.body(labMsgID(i))
		add(fmt.Sprintf("%s-%d.json", e.order, e.seq), bodies[i])
	}
	// Redeliveries: the producer timed out waiting for an acknowledgement
	// and sent the same event again, byte for byte, under a new file name.
	for _, i := range []int{1, 3, 10} {
		e := labEvents[i]
		add(fmt.Sprintf("%s-%d.json", e.order, e.seq), bodies[i])
	}
	// Poison: a write cut short, and an event whose producer forgot amount.
	add("ORD-1005-1.json", []byte(`{"msg_id":"EAI-20240611-000201","order_no":"ORD-1005","seq":1,"event_type":"order.created","amount":88.`))
	add("ORD-1005-2.json", []byte(`{"msg_id":"EAI-20240611-000202","order_no":"ORD-1005","seq":2,"event_type":"order.paid","currency":"CNY","customer":{"id":"C-51200"},"created_at":"2024-06-11T18:03:12+08:00"}`+"\n"))
	return files
}

// labCSVFields are the columns of LabCSV: the lab's fields, the
// customer's id flattened and the items left out (CSV has no arrays).
var labCSVFields = []string{"msg_id", "order_no", "seq", "event_type", "amount", "currency", "customer_id", "created_at"}

// LabCSV is the lab as the rows of one CSV file, in Lab's order under a
// header line (so a row's line is its message's number plus one): the
// truncated event is a row cut short where its write stopped (line 20:
// too few fields), the one without amount a row whose amount is empty
// (line 21).
func LabCSV() []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write(labCSVFields) // a bytes.Buffer does not fail
	for _, f := range Lab() {
		var m struct {
			MsgID     string `json:"msg_id"`
			Order     string `json:"order_no"`
			Seq       json.Number
			EventType string          `json:"event_type"`
			Amount    json.RawMessage `json:"amount"`
			Currency  string          `json:"currency"`
			Customer  struct{ ID string }
			CreatedAt string `json:"created_at"`
		}
		if err := json.Unmarshal(f.Data, &m); err != nil {
			// The write cut short: the fields it got to, and the amount's
			// first digits.
			_ = w.Write([]string{"EAI-20240611-000201", "ORD-1005", "1", "order.created", "88."})
			continue
		}
		_ = w.Write([]string{m.MsgID, m.Order, m.Seq.String(), m.EventType, string(bytes.Trim(m.Amount, `"`)), m.Currency, m.Customer.ID, m.CreatedAt})
	}
	w.Flush()
	return b.Bytes()
}

package sample

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Options shape a generated queue. Fractions are of the n files generated;
// the rest are first deliveries of new msg_ids.
type Options struct {
	// DupFrac is the fraction of files that redeliver an earlier valid
	// message: same msg_id and same bytes under a new file name. In [0, 1].
	DupFrac float64
	// PoisonFrac is the fraction of poison files, an even mix of parse
	// (truncated JSON), missing-field (no amount) and invalid-field (seq 0).
	// In [0, 1], and DupFrac+PoisonFrac <= 1.
	PoisonFrac float64
	// Seed makes the output reproducible: the same n, fractions and seed
	// always give the same files in the same order.
	Seed int64
}

// Expected is what consuming a generated queue with the default contract
// must record.
type Expected struct {
	// Unique is the number of distinct valid msg_ids: rows in processed.
	Unique int
	// Duplicates is the number of redeliveries.
	Duplicates int
	// DeadLetters is the number of poison files.
	DeadLetters int
}

// OrderSize is how many events each generated order has: the k-th unique
// message is seq k%OrderSize+1 of order k/OrderSize, so the order check
// of a fully consumed generated queue says OK.
const OrderSize = 5

// Generate produces n message files, passing each to emit in name order as
// soon as it is made, so a million files never sit in memory at once. It
// stops at emit's first error and returns it. Bodies are realistic order
// events of about 200 bytes. The first file is always a new msg_id, so a
// redelivery always has something to redeliver.
func Generate(n int, o Options, emit func(File) error) (Expected, error) {
	var exp Expected
	if n < 0 {
		return exp, fmt.Errorf("generate: n = %d is negative", n)
	}
	if o.DupFrac < 0 || o.PoisonFrac < 0 || o.DupFrac+o.PoisonFrac > 1 {
		return exp, errors.New("generate: fractions must be >= 0 and sum to at most 1")
	}
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x5b0015eed))
	for i := range n {
		var f File
		r := rng.Float64()
		switch {
		case r < o.PoisonFrac:
			f = poison(i, exp.DeadLetters, o.Seed)
			exp.DeadLetters++
		case r < o.PoisonFrac+o.DupFrac && exp.Unique > 0:
			k := rng.IntN(exp.Unique)
			f = File{Name: genName(i, k, ""), Data: genBody(k, o.Seed)}
			exp.Duplicates++
		default:
			k := exp.Unique
			f = File{Name: genName(i, k, ""), Data: genBody(k, o.Seed)}
			exp.Unique++
		}
		if err := emit(f); err != nil {
			return exp, err
		}
	}
	return exp, nil
}

var genEvents = [OrderSize]string{"order.created", "order.paid", "order.packed", "order.shipped", "order.delivered"}

var genCurrencies = [...]string{"CNY", "KRW", "USD", "EUR"}

// genBase is the first created_at of generated events.
var genBase = time.Date(2024, 6, 11, 0, 0, 0, 0, time.UTC)

// mix is splitmix64: a message's details are a pure function of its index
// and the seed, so a redelivery can rebuild the original's bytes exactly
// instead of remembering them.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func genName(i, k int, tag string) string {
	return fmt.Sprintf("%09d-ORD-%07d-%d%s.json", i+1, k/OrderSize+1, k%OrderSize+1, tag)
}

// genBody is the k-th unique message of a seed.
func genBody(k int, seed int64) []byte {
	h := mix(uint64(k) ^ mix(uint64(seed)))
	order, seq := k/OrderSize+1, k%OrderSize+1
	cents := h % 10_000_000
	at := genBase.Add(time.Duration(k) * 1500 * time.Millisecond)
	// Amounts alternate between a JSON number and a numeric string, both
	// kept exactly as written by the ledger.
	amount := fmt.Sprintf("%d.%02d", cents/100, cents%100)
	if h>>40&1 == 1 {
		amount = `"` + amount + `"`
	}
	return fmt.Appendf(nil, `{"msg_id":"GEN-%d-%010d","order_no":"ORD-%07d","seq":%d,"event_type":%q,"amount":%s,"currency":%q,"customer":{"id":"C-%05d"},"created_at":%q}`+"\n",
		seed, k, order, seq, genEvents[seq-1], amount, genCurrencies[h>>20%uint64(len(genCurrencies))],
		h>>8%100000, at.Format(time.RFC3339))
}

// poison is the p-th poison file, at position i.
func poison(i, p int, seed int64) File {
	id := fmt.Sprintf("GEN-%d-P%09d", seed, p)
	name := fmt.Sprintf("%09d-POISON-%d.json", i+1, p)
	var data []byte
	switch p % 3 {
	case 0: // parse: a write cut short
		data = fmt.Appendf(nil, `{"msg_id":%q,"order_no":"ORD-X%06d","seq":1,"event_type":"order.created","amount":12`, id, p)
	case 1: // missing-field: no amount
		data = fmt.Appendf(nil, `{"msg_id":%q,"order_no":"ORD-X%06d","seq":1,"event_type":"order.created","currency":"CNY"}`+"\n", id, p)
	default: // invalid-field: seq must be >= 1
		data = fmt.Appendf(nil, `{"msg_id":%q,"order_no":"ORD-X%06d","seq":0,"event_type":"order.created","amount":"1.00","currency":"CNY"}`+"\n", id, p)
	}
	return File{Name: name, Data: data}
}

package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool"
)

// BenchmarkRecordBatchFile is the ledger's share of a batch file's plain
// drain: RecordBatch of chunks of records mixed as spool bench's are (a
// tenth redeliveries of earlier records, one in a hundred poison, msg_ids
// in file order), each chunk with the file's progress, for several chunk
// sizes.
//
//	go test -run '^$' -bench RecordBatchFile -count 6 ./ledger/sqlite
func BenchmarkRecordBatchFile(b *testing.B) {
	for _, size := range []int{256, 1024, 4096} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			db, _ := openTemp(b)
			defer db.Close()
			ctx := context.Background()
			l := db.Consumer()
			rng := rand.New(rand.NewPCG(1, 2))
			p := spool.BatchProgress{File: "bench.jsonl:1:2:3", Batch: "bench"}
			n, unique := 0, 0
			var cpu time.Duration
			body := func(k int) string {
				return fmt.Sprintf(`{"msg_id":"GEN-1-%010d","order_no":"ORD-%07d","seq":%d,"event_type":"order.created","amount":"%d.%02d","currency":"CNY","customer":{"id":"C-%05d"},"created_at":"2024-06-11T00:00:00Z"}`,
					k, k/5, k%5+1, k%9973, k%100, k%100000)
			}
			for b.Loop() {
				b.StopTimer()
				batch := make([]*spool.Delivery, size)
				for i := range batch {
					claim, file := p.Batch+"#"+strconv.Itoa(n), "bench.jsonl#L"+strconv.Itoa(n+1)
					r := rng.Float64()
					switch {
					case r < 0.01:
						batch[i] = &spool.Delivery{Claim: claim, File: file, Consumer: "test", At: time.Now(),
							Reject: &spool.RejectError{Reason: spool.ReasonParse, Detail: "bench"}}
					default:
						k := unique
						if r < 0.11 && unique > 0 {
							k = rng.IntN(unique)
						} else {
							unique++
						}
						raw := body(k)
						batch[i] = &spool.Delivery{Claim: claim, File: file, Ino: 7, Consumer: "test", At: time.Now(),
							Hash: spool.ContentHash([]byte(raw)), Size: int64(len(raw)),
							Message: &spool.Message{MsgID: fmt.Sprintf("GEN-1-%010d", k), OrderNo: fmt.Sprintf("ORD-%07d", k/5),
								Seq: int64(k%5 + 1), Amount: spool.Amount(fmt.Sprintf("%d.%02d", k%9973, k%100)), Raw: []byte(raw)}}
					}
					n++
				}
				p.Position = strconv.Itoa(n)
				b.StartTimer()
				c0 := cpuTime(b)
				if _, err := l.RecordBatch(ctx, batch, spool.Work{}, p); err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime(b) - c0
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(n), "µs/record")
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(n), "cpu-µs/record")
		})
	}
}

// cpuTime is the process's user and system time so far: on a machine
// shared with other work, the processor time a record costs is steadier
// than its wall time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

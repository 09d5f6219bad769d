//go:build linux

package queue

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkClaimReadFinish is the claim loop of a consumer, one message at
// a time: claim from inbox/, read, finish into done/ (no parsing, no
// ledger, no fsync). Its cost per message is what the filesystem charges
// spool, to set beside spool bench's floor loops; the files are written
// before the timer starts.
func BenchmarkClaimReadFinish(b *testing.B) {
	d := newQueue(b)
	body := []byte(`{"msg_id":"GEN-1-0000000001","order_no":"ORD-0000001","seq":1,"event_type":"order.created","amount":"12.50","currency":"EUR"}` + "\n")
	names := make([]string, b.N)
	for i := range names {
		names[i] = fmt.Sprintf("%09d-msg.json", i)
		if err := os.WriteFile(filepath.Join(d.StagePath(Inbox), names[i]), body, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	s, err := d.Join()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for _, name := range names {
		c, err := s.Claim(name)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Read(c, 1<<20); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Finish(c, Done); err != nil {
			b.Fatal(err)
		}
	}
}

//go:build linux

package queue

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkWriteStageFiles writes chunks of 10 dead letters into error/,
// as a batch file's chunk of 1 024 records at 1% poison has them: with
// groups=1 in one WriteStageFiles call, with groups=4 in four calls at
// once (how the consumer wrote them before the calls synced a group's
// files together). It reports the processor time a file, steadier than
// the wall time on a shared machine. Run it with TMPDIR on the disk to
// measure (a tmpfs has no syncs to speak of). With SPOOL_BENCH_KEEP set
// to a directory, the queue is made there and kept: on ext4 without a
// journal, a file created within minutes of deletions near it costs a
// scan of the inodes they freed (find_inode_bit, recently_deleted), and
// the cleanup of the run before would be measured instead.
func BenchmarkWriteStageFiles(b *testing.B) {
	const chunk = 10
	content := []byte(`{"msg_id":"GEN-1-0000012345","order_no":"ORD-0002469","seq":0,"amount":"12.50"}` + "\n")
	for _, groups := range []int{1, 4} {
		b.Run("groups="+strconv.Itoa(groups), func(b *testing.B) {
			d := benchQueue(b)
			n := 0
			var cpu time.Duration
			for b.Loop() {
				files := make([]StageFile, chunk)
				for i := range files {
					files[i] = StageFile{Name: fmt.Sprintf("bench~L%d.jsonl", n), Fill: func(w io.Writer) error {
						_, err := w.Write(content)
						return err
					}}
					n++
				}
				c0 := processTime(b)
				var wg sync.WaitGroup
				for g := range groups {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := d.WriteStageFiles(Error, files[g*chunk/groups:(g+1)*chunk/groups]); err != nil {
							b.Error(err)
						}
					}()
				}
				wg.Wait()
				cpu += processTime(b) - c0
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(n), "µs/file")
			b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/file")
		})
	}
}

// benchQueue is newQueue, in SPOOL_BENCH_KEEP and kept when it is set.
func benchQueue(b *testing.B) *Dir {
	keep := os.Getenv("SPOOL_BENCH_KEEP")
	if keep == "" {
		return newQueue(b)
	}
	parent, err := os.MkdirTemp(keep, "stagefiles-")
	if err != nil {
		b.Fatal(err)
	}
	root := filepath.Join(parent, "q")
	if err := Init(root); err != nil {
		b.Fatal(err)
	}
	d, err := Open(root)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

// processTime is the process's user and system time so far.
func processTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

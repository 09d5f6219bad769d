//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Batch files with --ordered (docs/DESIGN.md, "Batch files: the
// consumer"): the records of one order key are called one at a time, in
// file order within a file and in claim order across files.

// requireKeyOrder fails unless the server saw the calls of every order key
// one at a time, its seqs never going backwards (a retry calls the same
// seq again), and every key of keys called perKey times and more.
func requireKeyOrder(t *testing.T, srv *callServer, keys []string, perKey int) {
	t.Helper()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.orderMax != 1 {
		t.Errorf("up to %d calls of one order key in flight at once, want 1", srv.orderMax)
	}
	for _, k := range keys {
		got := srv.seqs[k]
		if len(got) < perKey {
			t.Errorf("key %s: %d calls, want %d at least", k, len(got), perKey)
		}
		for i := 1; i < len(got); i++ {
			if got[i] < got[i-1] {
				t.Errorf("key %s: seq %d called after seq %d: %v", k, got[i], got[i-1], got)
				break
			}
		}
	}
}

// keyedCSV writes the rows of keys, perKey a key, interleaved, their seqs
// from first on: msg_id KEY-SEQ.
func keyedCSV(keys []string, first, perKey int) []byte {
	var b bytes.Buffer
	b.WriteString("msg_id,order_no,seq,amount\n")
	for seq := first; seq < first+perKey; seq++ {
		for _, k := range keys {
			fmt.Fprintf(&b, "%s-%d,%s,%d,1.00\n", k, seq, k, seq)
		}
	}
	return b.Bytes()
}

// TestBatchPostOrdered: records of five order keys across two CSV files,
// consumed with --post --ordered: the server sees each key's calls one at
// a time and in seq order, the first file's before the second's, while
// different keys are called at once. An early record refused with a 503
// holds its key's later records, in its file and in the next, until its
// retry (3s, so that its file is held for it and the second file waits
// in inbox/ meanwhile); the other keys go on.
func TestBatchPostOrdered(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv"}`)
	srv := newCallServer(t, 2*time.Millisecond)
	srv.answer = func(key string, nth int) (int, string) {
		if key == "o1-2" && nth == 0 {
			return http.StatusServiceUnavailable, ""
		}
		return 0, ""
	}
	keys := []string{"o0", "o1", "o2", "o3", "o4"}
	const perFile = 30
	putBytes(t, q, "a.csv", keyedCSV(keys, 1, perFile))
	putBytes(t, q, "b.csv", keyedCSV(keys, perFile+1, perFile))
	r := mustRun(t, 0, "consume", q, "--post", srv.URL, "--ordered", "--concurrency", "8",
		"--retry-base", "3s", "--retry-jitter=false", "--retry-wait", "1m")
	if st := parseStats(t, r); st != (consumeStats{Processed: 2 * perFile * len(keys)}) {
		t.Fatalf("%+v, want %d processed\n%s", st, 2*perFile*len(keys), r)
	}
	requireKeyOrder(t, srv, keys, 2*perFile)
	seen, most := srv.seen(t)
	if seen["o1-2"] != 2 {
		t.Fatalf("o1-2 posted %d times, want its refused call and its retry", seen["o1-2"])
	}
	if most < 2 {
		t.Errorf("never more than %d call at once: different keys must be called concurrently", most)
	}
	srv.mu.Lock()
	retried := srv.starts["o1-2"][1]
	went := srv.starts["o0-"+fmt.Sprint(perFile)][0]
	srv.mu.Unlock()
	if !went.Before(retried) {
		t.Error("o0's last record of a.csv waited for o1's retry")
	}
	if !strings.Contains(r.stderr, "the other batch files wait for it") {
		t.Errorf("a.csv was not held for its retry with b.csv waiting\n%s", r)
	}
	if got := stageNames(t, q, done); !slices.Equal(got, []string{"a.csv", "b.csv"}) {
		t.Fatalf("done/ holds %q", got)
	}
	checkFsck(t, q)
}

// TestBatchPostOrderedWatch: in a watch, a file held for a record's retry
// keeps a file arriving meanwhile in inbox/ until it is finished, so that
// the new file's records of the refused key come after the retry; then
// the new file is consumed at once.
func TestBatchPostOrderedWatch(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv"}`)
	l := sqliteCallLedger(t, q)
	srv := newCallServer(t, time.Millisecond)
	srv.answer = func(key string, nth int) (int, string) {
		if key == "o1-2" && nth == 0 {
			return http.StatusServiceUnavailable, ""
		}
		return 0, ""
	}
	keys := []string{"o0", "o1", "o2"}
	const perFile = 10
	putBytes(t, q, "a.csv", keyedCSV(keys, 1, perFile))
	p := start(t, "consume", q, "--watch", "--post", srv.URL, "--ordered", "--retry-base", "3s", "--retry-jitter=false")
	// All but o1's records from o1-2 on: a.csv is then held for the retry.
	waitFor(t, cmdTimeout, "a.csv's records of o0 and o2", func() bool {
		n, _ := ledgerProcessed(l)
		return n == 2*perFile+1
	})
	putBytes(t, q, "b.csv", keyedCSV(keys, perFile+1, perFile))
	waitFor(t, cmdTimeout, "both files' records", func() bool {
		n, _ := ledgerProcessed(l)
		return n == 2*perFile*len(keys)
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := p.wait(t); r.code != 0 {
		t.Fatalf("the watch exited with a failure:\n%s", r)
	}
	requireKeyOrder(t, srv, keys, 2*perFile)
	if seen, _ := srv.seen(t); seen["o1-2"] != 2 {
		t.Fatalf("o1-2 posted %d times, want its refused call and its retry", seen["o1-2"])
	}
	if got := stageNames(t, q, done); !slices.Equal(got, []string{"a.csv", "b.csv"}) {
		t.Fatalf("done/ holds %q", got)
	}
	checkFsck(t, q)
}

package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/text/encoding/unicode"
)

// TestBatchUTF16: a tab-delimited UTF-16LE file with a byte order mark and
// CRLF line ends, as Windows tools write "Unicode text", has its
// characters kept exactly in the ledger (one beyond the BMP, a surrogate
// pair in the file); its bad row is a one-record dead letter in UTF-16LE
// with the file's mark, which fixed in the same encoding and replayed is
// processed; fsck is clean. A UTF-16 file in a UTF-8 queue is one dead
// letter that names the encoding to set.
func TestBatchUTF16(t *testing.T) {
	t.Parallel()
	enc := unicode.UTF16(unicode.LittleEndian, unicode.UseBOM)
	encode := func(s string) []byte {
		b, err := enc.NewEncoder().Bytes([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	q := batchQueue(t, `{"format": "csv", "encoding": "utf-16le", "delimiter": "\t"}`)
	const head = "msg_id\torder_no\tseq\tamount\tnote\r\n"
	putBytes(t, q, "export.csv", encode(head+
		"u1\to1\t1\t3.50\tJosé 𝄞\r\n"+
		"u2\to2\tx\t4.50\t서울\r\n"+
		"u3\to3\t1\t5.50\t東京\r\n"))
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st != (consumeStats{Processed: 2, DeadLetters: 1}) {
		t.Fatalf("%+v, want 2 processed and 1 dead letter", st)
	}
	db := filepath.Join(q, "ledger.db")
	for id, note := range map[string]string{"u1": "José 𝄞", "u3": "東京"} {
		if n := queryLedger(t, db, `SELECT COUNT(*) FROM processed WHERE msg_id = ? AND instr(payload, ?) > 0`, id, `"note":"`+note+`"`); n != 1 {
			t.Errorf("the payload of %s does not hold %q", id, note)
		}
	}
	if got := stageNames(t, q, errorStage); !slices.Equal(got, []string{"export~L3.csv"}) {
		t.Fatalf("error/ holds %q, want the bad row's dead letter", got)
	}
	dl := filepath.Join(q, errorStage, "export~L3.csv")
	got, err := os.ReadFile(dl)
	if err != nil {
		t.Fatal(err)
	}
	if want := encode(head + "u2\to2\tx\t4.50\t서울\r\n"); !bytes.Equal(got, want) {
		t.Fatalf("dead letter % x\nwant the header and the row in UTF-16LE with the mark: % x", got, want)
	}
	if err := os.WriteFile(dl, encode(head+"u2\to2\t1\t4.50\t서울\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, 0, "replay", q, "export~L3.csv")
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st != (consumeStats{Processed: 1}) {
		t.Fatalf("after the fix and the replay: %+v, want 1 processed", st)
	}
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM processed WHERE msg_id = 'u2' AND instr(payload, ?) > 0`, `"note":"서울"`); n != 1 {
		t.Error("the replayed row's payload does not hold its note")
	}
	checkFsck(t, q)

	u8 := batchQueue(t, `{"format": "csv"}`)
	putBytes(t, u8, "export.csv", encode(head+"u1\to1\t1\t3.50\tx\r\n"))
	r := mustRun(t, 0, "consume", u8)
	if st := parseStats(t, r); st != (consumeStats{DeadLetters: 1}) || !bytes.Contains([]byte(r.stderr), []byte("set the encoding to utf-16le")) {
		t.Fatalf("a UTF-16 file in a UTF-8 queue: %+v\n%s", st, r.stderr)
	}
}

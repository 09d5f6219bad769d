package report

import (
	"bufio"
	"encoding/csv"
	"io"

	"github.com/spoolq/spool/ledger"
)

// WriteDups writes msg_ids one a line, in the order given (the ledger's
// Duplicates returns them distinct and ascending). A msg_id is written as
// it is, except one holding a line break (JSON allows "\n" in a string),
// which is written Go-quoted so that every line is still one msg_id.
func WriteDups(w io.Writer, ids []string) error {
	bw := bufio.NewWriter(w)
	for _, id := range ids {
		bw.WriteString(Terminal(id))
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// WriteConflictsCSV writes conflicting redeliveries (from
// ledger.Messages.Conflicts, sorted by msg_id then time) as CSV with the header
// msg_id,processed_file,processed_hash,duplicate_file,duplicate_hash,at.
// The processed side is empty when its row was pruned; at is when the
// duplicate was inspected, RFC 3339 UTC with microseconds.
func WriteConflictsCSV(w io.Writer, conflicts []ledger.Conflict) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"msg_id", "processed_file", "processed_hash", "duplicate_file", "duplicate_hash", "at"}); err != nil {
		return err
	}
	for _, c := range conflicts {
		if err := cw.Write(terminalAll([]string{c.MsgID, c.ProcessedFile, c.ProcessedHash, c.DuplicateFile, c.DuplicateHash, csvTime(c.At)})); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

package report

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// WriteDups writes msg_ids one a line, in the order given (the ledger's
// Duplicates returns them distinct and ascending). A msg_id is written as
// it is, except one holding a line break (JSON allows "\n" in a string),
// which is written Go-quoted so that every line is still one msg_id.
func WriteDups(w io.Writer, ids []string) error {
	bw := bufio.NewWriter(w)
	for _, id := range ids {
		if strings.ContainsAny(id, "\n\r") {
			id = strconv.Quote(id)
		}
		bw.WriteString(id)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

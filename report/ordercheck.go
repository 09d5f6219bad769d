package report

import (
	"encoding/csv"
	"io"

	"github.com/spoolq/spool/ledger"
)

// WriteOrderCheck writes the result of the order check: the single line OK
// when there are no problems, otherwise CSV with the header
// order_no,seq,problem and one row per problem, in the order given. It
// reports ok when there were none.
func WriteOrderCheck(w io.Writer, problems []ledger.OrderProblem) (ok bool, err error) {
	if len(problems) == 0 {
		_, err := io.WriteString(w, "OK\n")
		return true, err
	}
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"order_no", "seq", "problem"}); err != nil {
		return false, err
	}
	for _, p := range problems {
		if err := cw.Write(terminalAll([]string{p.OrderNo, p.Seq, p.Problem})); err != nil {
			return false, err
		}
	}
	cw.Flush()
	return false, cw.Error()
}

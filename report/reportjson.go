package report

import (
	"io"

	"github.com/spoolq/spool/ledger"
)

// The --json forms of the reports whose text form is a list or CSV: dups,
// order-check and schema. Names a producer chose keep their bytes in a
// _b64 key when they are not valid UTF-8 (B64).

// ConflictJSON is one object of spool dups --conflicts --json; its keys
// are the CSV's and stable.
type ConflictJSON struct {
	MsgID            string  `json:"msg_id"`
	ProcessedFile    string  `json:"processed_file"`
	ProcessedFileB64 *string `json:"processed_file_b64,omitempty"`
	ProcessedHash    string  `json:"processed_hash"`
	DuplicateFile    string  `json:"duplicate_file"`
	DuplicateFileB64 *string `json:"duplicate_file_b64,omitempty"`
	DuplicateHash    string  `json:"duplicate_hash"`
	At               string  `json:"at"`
}

// WriteConflictsJSON writes conflicts as one JSON array; [] when none.
func WriteConflictsJSON(w io.Writer, conflicts []ledger.Conflict) error {
	out := make([]ConflictJSON, 0, len(conflicts))
	for _, c := range conflicts {
		out = append(out, ConflictJSON{MsgID: c.MsgID, ProcessedFile: c.ProcessedFile, ProcessedFileB64: B64(c.ProcessedFile),
			ProcessedHash: c.ProcessedHash, DuplicateFile: c.DuplicateFile, DuplicateFileB64: B64(c.DuplicateFile),
			DuplicateHash: c.DuplicateHash, At: csvTime(c.At)})
	}
	return WriteJSON(w, out)
}

// WriteDupsJSON writes the duplicate msg_ids as one JSON array of
// strings, ascending; [] when none.
func WriteDupsJSON(w io.Writer, ids []string) error {
	if ids == nil {
		ids = []string{}
	}
	return WriteJSON(w, ids)
}

// OrderProblemJSON is one object of spool order-check --json.
type OrderProblemJSON struct {
	OrderNo string `json:"order_no"`
	Seq     string `json:"seq"`
	Problem string `json:"problem"`
}

// WriteOrderCheckJSON writes {"ok": bool, "problems": [...]}; ok reports
// whether there were none.
func WriteOrderCheckJSON(w io.Writer, problems []ledger.OrderProblem) (ok bool, err error) {
	out := struct {
		OK       bool               `json:"ok"`
		Problems []OrderProblemJSON `json:"problems"`
	}{OK: len(problems) == 0, Problems: []OrderProblemJSON{}}
	for _, p := range problems {
		out.Problems = append(out.Problems, OrderProblemJSON{OrderNo: p.OrderNo, Seq: p.Seq, Problem: p.Problem})
	}
	return out.OK, WriteJSON(w, out)
}

// SchemaJSON is one object of spool schema --json.
type SchemaJSON struct {
	Field string `json:"field"`
	Type  string `json:"type"`
	Role  string `json:"role"`
}

// WriteSchemaJSON writes rows as one JSON array; [] when none.
func WriteSchemaJSON(w io.Writer, rows []SchemaRow) error {
	out := make([]SchemaJSON, 0, len(rows))
	for _, r := range rows {
		out = append(out, SchemaJSON(r))
	}
	return WriteJSON(w, out)
}

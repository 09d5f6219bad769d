package report

import (
	"encoding/csv"
	"io"

	"github.com/spoolq/spool/ledger"
)

// WriteReplaysCSV writes the replay log (from ledger.ReplayLog.List, oldest
// first) as CSV with the header at,file,new_name,by,note: when (RFC 3339
// UTC with microseconds), the name in error/, the name it got in inbox/,
// who replayed it and why.
func WriteReplaysCSV(w io.Writer, replays []ledger.ReplayRecord) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"at", "file", "new_name", "by", "note"}); err != nil {
		return err
	}
	for _, r := range replays {
		if err := cw.Write(terminalAll([]string{csvTime(r.At), r.File, r.NewName, r.By, oneLine(r.Note)})); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReplayJSON is one object of WriteReplaysJSON's array; its keys are
// stable.
type ReplayJSON struct {
	// At is when it was replayed, RFC 3339 UTC with microseconds.
	At string `json:"at"`
	// File is the name it had in error/; NewName the one it got in inbox/.
	File    string `json:"file"`
	NewName string `json:"new_name"`
	// FileB64 and NewNameB64 are the names' bytes in base64 when they are
	// not valid UTF-8, else absent.
	FileB64    *string `json:"file_b64,omitempty"`
	NewNameB64 *string `json:"new_name_b64,omitempty"`
	// Ino is the file's inode number; null when unknown.
	Ino *uint64 `json:"ino"`
	// By is who replayed it; Note why (null when no note was given).
	By   string  `json:"by"`
	Note *string `json:"note"`
}

// WriteReplaysJSON writes the replay log as one JSON array of ReplayJSON
// objects, oldest first; [] when there were none.
func WriteReplaysJSON(w io.Writer, replays []ledger.ReplayRecord) error {
	out := make([]ReplayJSON, 0, len(replays))
	for _, r := range replays {
		j := ReplayJSON{At: csvTime(r.At), File: r.File, NewName: r.NewName, FileB64: B64(r.File), NewNameB64: B64(r.NewName), By: r.By, Note: jsonString(r.Note)}
		if r.Ino != 0 {
			ino := r.Ino
			j.Ino = &ino
		}
		out = append(out, j)
	}
	return WriteJSON(w, out)
}

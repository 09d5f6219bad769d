package report

import (
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/queue"
)

// claimPlaces adds to m the files of processing/ named as one of names:
// claims of running consumers, among them the claims a consumer holds
// until their retry is due, which the ledger knows by name only (its
// attempts table records no inode). seen holds the places found already,
// as "stage/name".
func claimPlaces(d *queue.Dir, m *MessageStory, names []string, seen map[string]bool) error {
	claims, err := d.ClaimFiles()
	if err != nil {
		return fmt.Errorf("show %s: %w", m.Query, err)
	}
	for _, c := range claims {
		key := string(queue.Processing) + "/" + c.Name
		if seen[key] || !slices.Contains(names, c.Name) {
			continue
		}
		seen[key] = true
		m.Places = append(m.Places, Place{Stage: queue.Processing, Name: c.Name, Ino: c.Ino})
	}
	return nil
}

// placeLine says where one file of m is: a stage and a name, and for a
// claim in processing/ whether it waits for its retry, and until when.
func placeLine(m MessageStory, pl Place) string {
	line := fmt.Sprintf("%s/%s", pl.Stage, Shown(pl.Name))
	if pl.Stage != queue.Processing {
		return line
	}
	if r := m.Retry; r != nil && r.File == pl.Name {
		return line + " (claimed, waiting for its retry, due " + r.NextAt.UTC().Format(time.RFC3339) + ")"
	}
	return line + " (claimed by a consumer)"
}

package report

import (
	"fmt"

	"github.com/spoolq/spool/batch"
	"github.com/spoolq/spool/queue"
)

// pendingDeadLetters tells which files of error/ without a dead-letter
// record are pending: the dead letters of a batch file's records that a
// consumer writes before the commit that records them, left by a run
// killed (or out of disk space) between the two while the batch file
// still waits to be consumed. The run that resumes the file finds each
// and records it, so they are neither lost (fsck) nor a replay's or a
// discard's: moved away, the resumed run would write the record's dead
// letter again, and the record would have two.
type pendingDeadLetters struct {
	d *queue.Dir
	// claimed are the names claimed in processing/, read once needed.
	claimed map[string]bool
}

// newPendingDeadLetters tells the pending dead letters of d's error/.
func newPendingDeadLetters(d *queue.Dir) *pendingDeadLetters { return &pendingDeadLetters{d: d} }

// Of returns where the batch file that the file name of error/, which has
// no dead-letter record, may be a record's dead letter of waits to be
// consumed ("inbox/orders.csv", claimed in processing/, or in held/), and
// whether one does: a name not of a record's dead letter's shape
// ("orders~L17.csv") never is.
func (p *pendingDeadLetters) Of(name string) (string, bool, error) {
	sources := batch.DeadLetterSources(name)
	if sources == nil {
		return "", false, nil
	}
	if p.claimed == nil {
		files, err := p.d.ClaimFiles()
		if err != nil {
			return "", false, err
		}
		p.claimed = make(map[string]bool, len(files))
		for _, f := range files {
			p.claimed[f.Name] = true
		}
	}
	for _, n := range sources {
		if p.claimed[n] {
			return "processing/…/" + n, true, nil
		}
		for _, s := range []queue.Stage{queue.Inbox, queue.Held} {
			if _, ok, err := p.d.Inode(s, n); err != nil {
				return "", false, err
			} else if ok {
				return string(s) + "/" + n, true, nil
			}
		}
	}
	return "", false, nil
}

// PendingError is a replay or discard of a pending dead letter by name
// (pendingDeadLetters), refused: it is not a dead letter of the ledger
// yet. It is queue.ErrNotInError for the callers that tell those apart.
type PendingError struct {
	// File is the name in error/; Of where its batch file waits.
	File string `json:"file"`
	Of   string `json:"of"`
}

func (e *PendingError) Error() string {
	return e.File + ": " + e.why() + " (replay or discard it after)"
}

// why is what a pending dead letter is, for its row's detail too.
func (e *PendingError) why() string {
	return fmt.Sprintf("not recorded yet: a dead letter of %s, which the run that consumes it records", e.Of)
}

// Is makes a PendingError a queue.ErrNotInError.
func (e *PendingError) Is(target error) bool { return target == queue.ErrNotInError }

package report

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// InError checks records of dead letters against error/ as it is, for
// whoever lists them from the ledger's index (the HTTP API and the
// console, through ledger.DeadLetterQuery.Check and DeadLetters.Groups) and
// for spool fsck: a record lists a file only while that file is in
// error/. The file of a record is in error/ when error/ holds, under the
// record's name or that name with a collision suffix ("a~2.json"), a file
// of the record's inode; or, when none has it, a file of such a name
// whose inode has no dead-letter record of that name: the record's file
// copied to a new inode (a queue copied or restored) or edited in place
// (sed -i, an editor), which is still that dead letter. A file removed
// by hand, or replayed or discarded after an edit, is not there.
//
// The common case costs one fstatat per record, under its own name; a
// record not found so (its file gone, suffixed, copied or edited) costs
// one listing of error/'s names per InError, and an indexed read of the
// dead-letter records of the inodes found under its name. An InError
// keeps that listing: use one per request, never concurrently.
type InError struct {
	d *queue.Dir
	l *ledger.DB
	// byStem holds error/'s names by their name without the collision
	// suffix (stored as the ledger stores names), once listed; long holds
	// the names a suffix may have shortened (see suffixed in package
	// queue), matched by sameMessage instead.
	byStem map[string][]string
	long   []string
}

// NewInError returns an InError over the queue d and its ledger l.
func NewInError(d *queue.Dir, l *ledger.DB) *InError {
	return &InError{d: d, l: l}
}

// longName is the length from which a move into a stage may have
// shortened a name's stem to fit a suffix within NAME_MAX (255 bytes).
const longName = 255 - len("~99999.json")

// Check reports, for each of files, whether its file is in error/; it is
// a ledger.FileCheck.
func (c *InError) Check(ctx context.Context, files []ledger.DeadLetterFile) ([]bool, error) {
	present := make([]bool, len(files))
	var pending []int
	for i, f := range files {
		ino, ok, err := c.d.Inode(queue.Error, f.File)
		if err != nil {
			return nil, fmt.Errorf("check dead letters: %w", err)
		}
		if ok && (ino == f.Ino || f.Ino == 0) {
			present[i] = true
			continue
		}
		pending = append(pending, i)
	}
	if len(pending) == 0 {
		return present, nil
	}
	if err := c.index(); err != nil {
		return nil, err
	}
	// Look for each pending record's inode under the names of its family;
	// keep the other inodes found there.
	type other struct {
		name string
		ino  uint64
	}
	others := map[int][]other{}
	var inos []uint64
	for _, i := range pending {
		f := files[i]
		for _, name := range c.family(f.File) {
			ino, ok, err := c.d.Inode(queue.Error, name)
			if err != nil {
				return nil, fmt.Errorf("check dead letters: %w", err)
			}
			if !ok {
				continue
			}
			if ino == f.Ino || f.Ino == 0 {
				present[i] = true
				break
			}
			others[i] = append(others[i], other{name, ino})
		}
		if !present[i] {
			for _, o := range others[i] {
				inos = append(inos, o.ino)
			}
		}
	}
	if len(inos) == 0 {
		return present, nil
	}
	names, err := c.l.DeadLetters().Names(ctx, inos)
	if err != nil {
		return nil, fmt.Errorf("check dead letters: %w", err)
	}
	for _, i := range pending {
		if present[i] {
			continue
		}
		for _, o := range others[i] {
			own := false
			for _, n := range names[o.ino] {
				own = own || sameMessage(o.name, n)
			}
			if !own {
				present[i] = true // a copy or an edit of the record's file
				break
			}
		}
	}
	return present, nil
}

// index lists error/'s names once.
func (c *InError) index() error {
	if c.byStem != nil {
		return nil
	}
	c.byStem = map[string][]string{}
	err := c.d.Scan(queue.Error, func(names []string) error {
		for _, n := range names {
			s := storedName(n)
			c.byStem[unsuffixed(s)] = append(c.byStem[unsuffixed(s)], n)
			if len(n) >= longName {
				c.long = append(c.long, n)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("check dead letters: %w", err)
	}
	return nil
}

// family returns the names of error/ that a file recorded under name may
// have there: the name itself, with a collision suffix, or, for a long
// name, with its stem shortened to fit one.
func (c *InError) family(name string) []string {
	out := c.byStem[unsuffixed(name)]
	if len(name) >= longName-len(".json") {
		for _, n := range c.long {
			if sameMessage(n, name) && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// storedName is name as the ledger stores file names: valid UTF-8
// without NUL.
func storedName(name string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(name, "\uFFFD"), "\x00", "\uFFFD")
}

// unsuffixed is name without the collision suffix a move into a stage may
// have added before its extension, as queue puts it ("a~2.json" is
// "a.json", a batch file's dead letter "orders~L17~2.csv" is
// "orders~L17.csv"); name itself when it has none.
func unsuffixed(name string) string {
	stem, ext := name, ""
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		stem, ext = name[:i], name[i:]
	}
	i := strings.LastIndexByte(stem, '~')
	if i <= 0 || i == len(stem)-1 || strings.Trim(stem[i+1:], "0123456789") != "" {
		return name
	}
	return stem[:i] + ext
}

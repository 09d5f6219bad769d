package fsck

import (
	"cmp"
	"context"
	"hash/fnv"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/batch"
)

// This file holds how fsck tells files apart without keeping their names:
// keys of an inode and a hash of the name.

// fileKey identifies a file by its inode and a hash of its name. An inode
// alone names a file only while it exists: ext4 and tmpfs give a freed
// inode to the next new file at once, so a record of a file removed from
// done/ would pass for the record of an unrelated file that got its inode.
// The name tells them apart, as report.Errors does for error/.
type fileKey struct{ ino, name uint64 }

func compareKeys(a, b fileKey) int {
	return cmp.Or(cmp.Compare(a.ino, b.ino), cmp.Compare(a.name, b.name))
}

// recordedKey is the key of a file the ledger recorded under name.
func recordedKey(ino uint64, name string) fileKey {
	return fileKey{ino, nameHash(storedName(batchFile(name)))}
}

// batchFile returns the name of the batch file a record's file column
// names ("orders.csv#L17" is a record of orders.csv, which is where its
// inode is: docs/DESIGN.md, "Batch files: the consumer"); any other name
// as it is.
func batchFile(name string) string {
	i := strings.LastIndexByte(name, '#')
	if i <= 0 || i+2 >= len(name) || name[i+1] != 'L' && name[i+1] != 'E' || strings.Trim(name[i+2:], "0123456789") != "" {
		return name
	}
	return name[:i]
}

// stageKeys appends the keys a file of a stage may have been recorded
// under: its name, and when the name carries a collision suffix
// ("a~2.json") that a move into the stage may have added, the name without
// it. A file recorded under a name neither matches (the suffix shortened
// its stem to fit NAME_MAX) is read, which costs time but not correctness.
func stageKeys(keys []fileKey, ino uint64, name string) []fileKey {
	name = storedName(name)
	keys = append(keys, fileKey{ino, nameHash(name)})
	// The extension: ".json", or a batch file's (".csv").
	stem, ext := name, ""
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		stem, ext = name[:i], name[i:]
	}
	if i := strings.LastIndexByte(stem, '~'); i > 0 && i < len(stem)-1 && strings.Trim(stem[i+1:], "0123456789") == "" {
		keys = append(keys, fileKey{ino, nameHash(stem[:i] + ext)})
	}
	return keys
}

func nameHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// storedName is name as the ledger stores file names: valid UTF-8 without
// NUL (see ledger's clean).
func storedName(name string) string {
	if utf8.ValidString(name) && !strings.Contains(name, "\x00") {
		return name
	}
	return strings.ReplaceAll(strings.ToValidUTF8(name, "\uFFFD"), "\x00", "\uFFFD")
}

// batchClaim is a claim of a batch file as its progress row keeps it:
// the file as it was claimed, and how far into its stream the records
// committed go (-1 when the position cannot be read).
type batchClaim struct {
	id     spool.BatchFileID
	offset int64
}

// knownFiles returns the keys of every file the ledger recorded as
// processed or as a duplicate, and of every batch file it kept progress
// of, sorted and without repeats; and the batch files' claims by key (a
// file claimed again after a change has one identity a claim).
func (c *checker) knownFiles(ctx context.Context) ([]fileKey, map[fileKey][]batchClaim, error) {
	var known []fileKey
	err := c.l.Fsck().EachKnownFile(ctx, func(ino uint64, file string) error {
		known = append(known, recordedKey(ino, file))
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	batches := map[fileKey][]batchClaim{}
	err = c.l.Fsck().EachBatchFile(ctx, func(id spool.BatchFileID, position string) error {
		k := fileKey{id.Ino, nameHash(storedName(id.Name))}
		known = append(known, k)
		offset := int64(-1)
		if p, err := batch.ParsePosition(position); err == nil {
			offset = p.Offset
		}
		batches[k] = append(batches[k], batchClaim{id, offset})
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(known, compareKeys)
	return slices.Compact(known), batches, nil
}

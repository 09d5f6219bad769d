package spool

import (
	"io"
	"strconv"
	"strings"
)

// BatchFiles reads a queue's batch files: files of many records, each of
// which is a message of its own (docs/DESIGN.md, "Batch files: the
// consumer"). Package batch implements it for a spool.conf format
// (batch.Files); Config.Batch carries it to the consumer. The root
// package defines the interface because it sits below batch, which
// imports it.
type BatchFiles interface {
	// Batched reports whether the file named name, a message name of the
	// queue, is read record by record; false reads it as one JSON
	// message, as spool always has.
	Batched(name string) bool
	// OpenBatch returns a reader of the records of the file named name,
	// which r reads from its start, going on after position (a
	// BatchRecord.After of an earlier reader of the same file; "" is the
	// start).
	OpenBatch(r io.ReadSeeker, name, position string) (BatchReader, error)
	// DoneFile is the name of the done-file that announced the data file
	// name, which the consumer claims with it and moves out of its claim
	// directory just before it; "" when name needs none (the queue has no
	// done-files, the file is a dead letter put back by a replay, or name
	// is not a data file of the queue).
	DoneFile(name string) string
	// IsDoneFile reports whether name is a done-file's name, which no
	// data file of the queue has: recovery finishes a claimed done-file
	// rather than put it back, since it could announce another file of
	// its data file's name there (the data file gets a new one).
	IsDoneFile(name string) bool
}

// BatchReader gives a batch file's records in file order. One that also
// has a method Note() string is asked, once its file is read to its end,
// what the operator should know though nothing failed ("" for nothing),
// and the consumer logs it as a warning.
type BatchReader interface {
	// Next returns the next record, or a failed one in its place, and
	// io.EOF after the last. Any other error is a failure to read the
	// file, not of its content: the run fails and the file is read again
	// later.
	Next() (BatchRecord, error)
}

// batchNoter is a BatchReader that may have something to say once its
// file is read to its end though nothing failed: the consumer logs it as
// a warning (package batch: an XML file without the queue's records).
type batchNoter interface {
	Note() string
}

// BatchRecord is one record of a batch file as the consumer needs it.
type BatchRecord struct {
	// Index is the record's place among the file's records and failures,
	// from 0.
	Index int64
	// Origin names the record in its file, for the ledger's file column:
	// "L17" (line 17) or "E5" (the fifth record element).
	Origin string
	// JSON is the record as one JSON object for Contract.Parse; nil when
	// Reject is set.
	JSON []byte
	// Key, when not empty, is the record's idempotency key, in place of
	// the contract's key field (a hashed key).
	Key string
	// Reject says why the record cannot be read.
	Reject *RejectError
	// Whole marks a failure of the whole file: it cannot be read at all,
	// and is moved to error/ itself, as a bad file always was.
	Whole bool
	// After is the position after the record, for OpenBatch.
	After string
	// DeadLetter is the name of the one-record file that stands for the
	// record in error/ should it fail (a failure of the reader, the
	// contract or its handler); WriteDeadLetter writes its content. Unset
	// when Whole.
	DeadLetter      string
	WriteDeadLetter func(w io.Writer) error
}

// BatchProgress is how far the consumer got in one batch file: kept in
// the ledger in the transaction that commits the records before it.
type BatchProgress struct {
	// File identifies the data file whatever its stage: its name, inode,
	// size and modification time (not its claim, which changes when a
	// recovered claim is claimed again).
	File string
	// Batch is the claim identity of the file's first claim: every
	// record's delivery claim is Batch, "#" and the record's index, so
	// that a record read again after a crash has the claim it would have
	// had.
	Batch string
	// Position is the BatchRecord.After of the last record committed
	// ("" before the first).
	Position string
	// Passed counts the records recorded before this write that the
	// progress passes with it (a Caller's, settled one by one):
	// RecordBatch adds them, and the outcomes of its own batch, to the
	// file's counts, so that a record is counted in the transaction that
	// moves the progress past it, once. Zero as BatchProgress returns it.
	Passed BatchCounts
}

// BatchCounts counts a batch file's records by outcome.
type BatchCounts struct {
	Processed, Duplicates, DeadLetters int64
}

// add counts one record settled as o.
func (n *BatchCounts) add(o Outcome) {
	switch o {
	case OutcomeProcessed:
		n.Processed++
	case OutcomeDuplicate:
		n.Duplicates++
	case OutcomeDeadLetter:
		n.DeadLetters++
	}
}

// addAll adds m's counts to n's.
func (n *BatchCounts) addAll(m BatchCounts) {
	n.Processed += m.Processed
	n.Duplicates += m.Duplicates
	n.DeadLetters += m.DeadLetters
}

// BatchFileName is the file's name in a BatchProgress.File identity: the
// name, then its inode, size and modification time, each after a colon
// (a name may hold colons of its own).
func BatchFileName(file string) string {
	if id, ok := ParseBatchFileID(file); ok {
		return id.Name
	}
	return file
}

// BatchFileID is what a BatchProgress.File identity is made of: the
// claimed file's name, inode, size and modification time when it was
// claimed.
type BatchFileID struct {
	Name  string
	Ino   uint64
	Size  int64
	Mtime int64 // Unix nanoseconds
}

// ParseBatchFileID returns the parts of a BatchProgress.File identity;
// ok is false when file is not one (fewer than three colons, or an
// inode, size or time that is not a number).
func ParseBatchFileID(file string) (id BatchFileID, ok bool) {
	name := file
	var fields [3]string
	for k := range 3 {
		i := strings.LastIndexByte(name, ':')
		if i < 0 {
			return BatchFileID{}, false
		}
		fields[2-k], name = name[i+1:], name[:i]
	}
	ino, err1 := strconv.ParseUint(fields[0], 10, 64)
	size, err2 := strconv.ParseInt(fields[1], 10, 64)
	mtime, err3 := strconv.ParseInt(fields[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return BatchFileID{}, false
	}
	return BatchFileID{Name: name, Ino: ino, Size: size, Mtime: mtime}, true
}

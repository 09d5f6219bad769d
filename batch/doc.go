// Package batch reads batch files: files of many records, each of which
// becomes a message of its own (docs/DESIGN.md, "Batch files: the record
// readers").
//
// A Format says which files of inbox/ are messages (Include, DoneFile and
// Match) and how each is read: JSON (today's one message per file), JSON
// Lines, CSV or XML, in UTF-8 or another WHATWG encoding, gzipped or not.
// Open gives a Reader whose Next returns the file's records in order, each
// with its origin (line, XML element, stream offsets), its bytes as they
// are in the file, and its fields as one JSON object for
// spool.Contract.Parse, or, in its place, why it cannot be read, as a
// *spool.RejectError: one bad record fails alone and the others are read
// on. Memory is bounded by the record limit, not by the file.
//
// A Record's After position lets a new Reader go on where an old one
// stopped (Reader.Resume); a failed record's DeadLetter is the one-record
// file that stands for it in error/; Key is a record's idempotency key for
// files without a key field.
//
// Files is the consumer's view of the package (spool.BatchFiles): the
// consumer that claims a batch file, commits its records and keeps its
// progress in the ledger (docs/DESIGN.md, "Batch files: the consumer")
// reads it through Files, which queueopen makes from spool.conf. The
// package imports the root package, the standard library and
// golang.org/x/text, nothing else.
package batch

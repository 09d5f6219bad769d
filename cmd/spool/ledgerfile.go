package main

import (
	"errors"

	"github.com/spoolq/spool/ledger/sqlite"
)

// dbFlagError is a *sqlite.FileError about the file --db names, told in
// the flag's words: "--db /tmp is a directory".
type dbFlagError struct {
	flag string // "--db PATH"
	err  *sqlite.FileError
}

func (e *dbFlagError) Error() string { return e.err.Describe(e.flag) }
func (e *dbFlagError) Unwrap() error { return e.err }

// nameDBFlag returns err told as a problem of --db db, when db was given
// and err is about that very file; else err unchanged. A sidecar or a
// directory at fault keeps its own name.
func nameDBFlag(db string, err error) error {
	var fe *sqlite.FileError
	if db == "" || !errors.As(err, &fe) || fe.Path != db {
		return err
	}
	return &dbFlagError{flag: "--db " + db, err: fe}
}

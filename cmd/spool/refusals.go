package main

import (
	"flag"

	"github.com/spoolq/spool/queueopen"
)

// This file holds the refusals of mistakes that would otherwise cost
// data or hang: each is exit 2 before anything changes.

// dbValue is --db's flag.Value. It refuses at parse time what can never
// name a ledger: an empty value (which would quietly mean the default
// file) and a URL whose scheme no backend has (which would be taken for a
// file path and create a file of that name).
type dbValue struct{ s *string }

func (v dbValue) String() string {
	if v.s == nil {
		return ""
	}
	return *v.s
}

// Set refuses what can never name a ledger (queueopen.CheckDBName).
func (v dbValue) Set(s string) error {
	if err := queueopen.CheckDBName(s); err != nil {
		return err
	}
	*v.s = s
	return nil
}

var _ flag.Value = dbValue{}

// Package report builds what spool's reporting commands show: the schema
// inferred from the messages waiting in inbox/, the dead letters in error/
// with their reasons and history (replays, earlier failures) as CSV, a
// table, JSON or counts per reason, the plan of a controlled replay, the
// order check, the duplicates and conflicting redeliveries, the replay log
// and the status summary. Each report is computed into plain data by one
// function and written by another to an io.Writer the caller gives; the
// package never prints on its own, never exits, and never moves a file.
package report

// Package e2e holds spool's end-to-end tests. They build the real spool
// binary once (TestMain, with -race when the tests themselves run with the
// race detector) and drive it as an operator or a script would, on queue
// directories they generate in temporary directories.
//
// Every test checks the invariants of docs/DESIGN.md from the outside, by
// reading the four stage directories and the ledger (read-only, with
// database/sql): the lab's flow and every command's contract; consumers
// killed at random instants, alone and concurrent; hostile inboxes, full
// disks, unreadable files and two filesystems; watch, shutdown and
// signals; the handlers, their retries and the dead-letter notifier; the
// queue's identity and every kind of damage fsck names; replays killed
// mid-way; the reports, logs and progress bar; and the operations kit of
// examples/ops. Each file's comment says what it covers.
//
// Most tests run in parallel, several per CPU (TestMain raises -parallel
// unless it is given), as they wait on processes, servers and timers. The
// crash and storm tests run smaller unless SPOOL_TEST_LONG=1 (as .ci/run
// sets); failures print the random seed, and SPOOL_E2E_SEED=N replays it.
// The tests need Linux (flock, mkfifo, /dev/shm for the cross-device case,
// which is skipped without it).
//
// The package has no API; this file exists so that it is a package.
package e2e

//go:build !linux

package queue

// spool runs on Linux only. The directory protocol relies on what Linux
// gives and other systems do not, or not alike: renameat2 with
// RENAME_NOREPLACE for moves that never overwrite a file (I1), flock on
// directories held for a consumer's life (I5), getdents, preadv2 with
// RWF_NOWAIT and dirfd-relative calls throughout. Every other file of this
// package is built for Linux only, so on any other system the build stops
// here, at the one line below, which says why.
var _ = spool_requires_linux

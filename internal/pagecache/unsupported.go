//go:build !linux

package pagecache

// spool runs on Linux only (see queue/unsupported.go), and so does this
// package: it uses Linux's fadvise and statfs magic numbers. On any other
// system the build stops at the line below, which says why.
var _ = spool_requires_linux

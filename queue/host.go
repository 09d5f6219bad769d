//go:build linux

package queue

import (
	"os"
	"strings"
)

// hostname is where thisHost learns the host's name. It is os.Hostname,
// a variable only so that a test can make it fail.
var hostname = os.Hostname

// thisHost is the host's name as this host's session IDs carry it, after
// their last '@': os.Hostname with '/' and '@' replaced by '_' (a session
// ID is a directory name, and its last '@' starts the host), or "localhost"
// when the name is unavailable or empty.
//
// Join names sessions with it and Recover compares each session's host
// against it, so both must use this one function: a session of this host is
// dead as soon as its lock is free (I5), while one of another host must
// also have outlived its lease. Were the two to disagree, this host's own
// dead sessions would wait out the lease before being recovered.
func thisHost() string {
	host, err := hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return strings.NewReplacer("/", "_", "@", "_").Replace(host)
}

// Host is this host's name as its session IDs carry it (see thisHost), for
// whatever else names this host in the ledger, such as fsck's repairs.
func Host() string { return thisHost() }

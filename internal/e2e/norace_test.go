//go:build linux && !race

package e2e

// raceEnabled reports whether the tests run with the race detector; the
// spool binary under test is then built with -race too at the quick sizes
// (raceSpool).
const raceEnabled = false

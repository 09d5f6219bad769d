//go:build !race

package batch

// raceEnabled reports whether the tests run with the race detector, which
// slows the readers about tenfold: the long streaming sizes are then the
// quick ones (the quick sizes already cover the races).
const raceEnabled = false

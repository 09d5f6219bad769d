package batch

import (
	"path"
	"slices"
	"strings"
)

// Includes reports whether a name in inbox/ is a data file of the queue:
// a name that a pattern of Include matches, does not start with "."
// (temp files, copies in progress) and does not have the done-file's
// shape (with DoneFile "{name}.done", no name ending in ".done" is data,
// whatever Include says, so that "*" cannot take done-files for data).
func (f Format) Includes(name string) bool {
	if name == "" || name[0] == '.' || f.isDoneName(name) {
		return false
	}
	for _, p := range f.includes() {
		if ok, _ := path.Match(p, name); ok { // Check refused bad patterns
			return true
		}
	}
	return false
}

// DoneName returns the done-file of the data file name; "" when the
// format has none.
func (f Format) DoneName(name string) string {
	if f.DoneFile == "" {
		return ""
	}
	return strings.Replace(f.DoneFile, "{name}", name, 1)
}

// isDoneName reports whether name is the done-file of some name.
func (f Format) isDoneName(name string) bool {
	if f.DoneFile == "" {
		return false
	}
	pre, suf, _ := strings.Cut(f.DoneFile, "{name}")
	return len(name) > len(pre)+len(suf) && strings.HasPrefix(name, pre) && strings.HasSuffix(name, suf)
}

// Ready is a data file of inbox/ that may be read, and its done-file,
// which phase 2 moves out of inbox/ with it ("" when none is needed).
type Ready struct {
	Name, Done string
}

// Matched is an inbox listing sorted out by Match.
type Matched struct {
	// Ready are the data files that may be read, in name order.
	Ready []Ready
	// Waiting are the data files whose done-file is not there yet.
	Waiting []string
	// Orphans are done-files whose data file is not there: left by a
	// producer that announced a file it did not write, or by a consumer
	// stopped between moving a data file and moving its done-file.
	Orphans []string
}

// Match sorts the names of an inbox listing into the data files ready to
// be read, those waiting for their done-file, and the done-files without
// a data file. Without a DoneFile every data file is ready. With one, a
// data file is ready once its done-file is listed, except a dead letter
// put back by a replay (a name as DeadLetter gives it, orders~L17.csv):
// spool wrote it whole, with a rename, so there is nothing to wait for.
// A producer's own file must then not be named like one. Names that are
// neither data nor done-files are left out.
func (f Format) Match(names []string) Matched {
	var m Matched
	listed := make(map[string]bool, len(names))
	for _, n := range names {
		listed[n] = true
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	claimed := map[string]bool{}
	for _, n := range sorted {
		if !f.Includes(n) {
			continue
		}
		done := f.DoneName(n)
		switch {
		case done == "":
			m.Ready = append(m.Ready, Ready{Name: n})
		case listed[done]:
			m.Ready = append(m.Ready, Ready{Name: n, Done: done})
			claimed[done] = true
		case isDeadLetterName(n):
			m.Ready = append(m.Ready, Ready{Name: n})
		default:
			m.Waiting = append(m.Waiting, n)
		}
	}
	for _, n := range sorted {
		if n != "" && n[0] != '.' && f.isDoneName(n) && !claimed[n] {
			m.Orphans = append(m.Orphans, n)
		}
	}
	return m
}

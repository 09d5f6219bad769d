package batch

import (
	"path"
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

// AnnouncedBy returns the done-file that must be in inbox/ before the
// file name is taken: DoneName of a data file, "" for a record dead letter
// put back by a replay (taken without one) and for a name that is no
// data file. The one rule of who needs an announcement, for the consumer
// (BatchFiles.DoneFile) and the queue's own movers (queue.Announcer).
func (f Format) AnnouncedBy(name string) string {
	if !f.Includes(name) || isDeadLetterName(name) {
		return ""
	}
	return f.DoneName(name)
}

// DataName returns the data file whose done-file is name, and false when
// name is no done-file's (the format has none, or name is not of its
// shape). The data file may not be one the format includes: a done-file
// of such a name announces nothing spool reads.
func (f Format) DataName(name string) (string, bool) {
	if !f.isDoneName(name) {
		return "", false
	}
	pre, suf, _ := strings.Cut(f.DoneFile, "{name}")
	return name[len(pre) : len(name)-len(suf)], true
}

// isDoneName reports whether name is the done-file of some name.
func (f Format) isDoneName(name string) bool {
	if f.DoneFile == "" {
		return false
	}
	pre, suf, _ := strings.Cut(f.DoneFile, "{name}")
	return len(name) > len(pre)+len(suf) && strings.HasPrefix(name, pre) && strings.HasSuffix(name, suf)
}

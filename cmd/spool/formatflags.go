package main

import (
	"encoding/json"

	"github.com/spoolq/spool/queueopen"
)

// override is consume's reading of the format flags given: the keys of
// spool.conf they set, for the library to check and apply
// (queueopen.FormatOverride); nil when none was given.
func (f *formatFlags) override() queueopen.FormatOverride {
	var o queueopen.FormatOverride
	for _, k := range f.keys() {
		if o == nil {
			o = queueopen.FormatOverride{}
		}
		o[k.Key], _ = json.Marshal(k.Value) // strings, a list, a map of a bool
	}
	return o
}

// check reads the flags as spool.conf's keys are read, before anything
// is opened: a bad value is a usage error, in spool.conf's words.
func (f *formatFlags) check(e *env) error {
	if err := f.override().Check(); err != nil {
		return e.usage("%v", err)
	}
	return nil
}

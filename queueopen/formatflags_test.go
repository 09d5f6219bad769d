package queueopen

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/spoolq/spool/batch"
)

// override is a FormatOverride of string values, as the flags give it.
func override(kv ...string) FormatOverride {
	o := FormatOverride{}
	for i := 0; i < len(kv); i += 2 {
		o[kv[i]], _ = json.Marshal(kv[i+1])
	}
	return o
}

func TestFormatOverrideCheck(t *testing.T) {
	for _, c := range []struct {
		o    FormatOverride
		want string // "" for no error
	}{
		{nil, ""},
		{override("format", "csv", "delimiter", ";"), ""},
		{override("format", ""), "--format: bad format: format is empty"},
		{override("delimiter", ";"), ""}, // Apply checks it with spool.conf's format
		{FormatOverride{"key": json.RawMessage(`{"hash": false}`)}, "--hash-key: bad format: key.hash is false"},
	} {
		err := c.o.Check()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: got %v, want %q", c.o, err, c.want)
		}
	}
}

func TestFormatOverrideApply(t *testing.T) {
	csv := &Config{Path: "q/spool.conf", Format: batch.Format{Kind: batch.CSV, Delimiter: ";"}}
	plain := &Config{Path: "q/spool.conf"}
	for _, c := range []struct {
		file *Config
		o    FormatOverride
		want batch.Format // with no error
		err  string
	}{
		{nil, nil, batch.Format{}, ""},
		{nil, override("format", "csv"), batch.Format{Kind: batch.CSV}, ""},
		{plain, override("format", "jsonl"), batch.Format{Kind: batch.JSONL}, ""},
		{csv, nil, csv.Format, ""},
		{csv, override("format", "csv", "delimiter", ";", "encoding", "UTF-8"), csv.Format, ""},
		{csv, override("format", "jsonl"), batch.Format{}, `sets format "csv", and --format says "jsonl"`},
		{csv, override("comment", "#"), batch.Format{}, `whose comment is "", and --comment says "#"`},
	} {
		got, err := c.o.Apply(c.file)
		var ce *ConfigError
		switch {
		case c.err != "" && (!errors.As(err, &ce) || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%v over %v: got %v, want a *ConfigError saying %q", c.o, c.file, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%v over %v: %v", c.o, c.file, err)
		case c.err == "" && got.format().Kind != c.want.Kind:
			t.Errorf("%v over %v: format %+v, want %+v", c.o, c.file, got.format(), c.want)
		}
	}
	for _, c := range []struct {
		o    FormatOverride
		want string
	}{
		{override("delimiter", ";"), "format flags: bad format: delimiter is for csv, and the format is json"},
		{override("format", "json", "done_file", "{name}.ok"), "the json format reads one message per *.json file"},
		{override("format", "xml"), `the xml format needs "record"`},
		{override("format", "cvs"), `format flags: bad format: format "cvs" is unknown`},
	} {
		var fe *FormatFlagError
		if _, err := c.o.Apply(plain); !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want a *FormatFlagError saying %q", c.o, err, c.want)
		}
	}
	if plain.Format.Kind != "" {
		t.Errorf("Apply changed spool.conf's Config: %+v", plain.Format)
	}
}

package queueopen_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/queueopen"
)

// TestWriteConfig: a new spool.conf is written readable by all; the same
// contract however written is not rewritten; another is refused without
// force, and replaced with it.
func TestWriteConfig(t *testing.T) {
	dir := newQueue(t)
	path := filepath.Join(dir, queueopen.ConfigName)
	a := []byte("{\n  \"key_field\": \"id\"\n}\n")
	if wrote, err := queueopen.WriteConfig(dir, a, false); err != nil || !wrote {
		t.Fatalf("new: wrote %v, %v", wrote, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode: %v, %v", fi, err)
	}
	if exists, same, err := queueopen.SameConfig(dir, []byte(`{"key_field":"id"}`)); err != nil || !exists || !same {
		t.Errorf("same contract: %v %v %v", exists, same, err)
	}
	if wrote, err := queueopen.WriteConfig(dir, []byte(`{"key_field": "id"}`), false); err != nil || wrote {
		t.Errorf("the same: wrote %v, %v", wrote, err)
	}
	b := []byte("{\n  \"key_field\": \"other\"\n}\n")
	var oc *queueopen.OtherContractError
	if _, err := queueopen.WriteConfig(dir, b, false); !errors.As(err, &oc) || oc.Path != path {
		t.Errorf("another without force: %v", err)
	}
	if wrote, err := queueopen.WriteConfig(dir, b, true); err != nil || !wrote {
		t.Errorf("another with force: wrote %v, %v", wrote, err)
	}
	if got, _ := os.ReadFile(path); string(got) != string(b) {
		t.Errorf("file %q, want %q", got, b)
	}
}

// ConfigText writes the keys given, in order, one a line, and refuses
// what a consumer would refuse to read.
func TestConfigText(t *testing.T) {
	got, err := queueopen.ConfigText([]queueopen.ConfigKey{{"key_field", "id"}, {"required", []string{"id", "seq"}}, {"max_size", int64(1024)}})
	want := "{\n  \"key_field\": \"id\",\n  \"required\": [\"id\",\"seq\"],\n  \"max_size\": 1024\n}\n"
	if err != nil || string(got) != want {
		t.Fatalf("ConfigText = %q, %v; want %q", got, err, want)
	}
	if got, err := queueopen.ConfigText(nil); got != nil || err != nil {
		t.Errorf("ConfigText(nil) = %q, %v; want nil, nil", got, err)
	}
	if _, err := queueopen.ConfigText([]queueopen.ConfigKey{{"no_such_key", 1}}); err == nil {
		t.Error("ConfigText of an unknown key: no error")
	}
	if _, err := queueopen.ConfigText([]queueopen.ConfigKey{{"key_field", ""}}); err == nil {
		t.Error(`ConfigText of key_field "": no error`)
	}
}

// TestNewConfigText: the keys an Override and a FormatOverride set, and
// only them, contract first and the format in its documented order; a
// contract consume would refuse is refused.
func TestNewConfigText(t *testing.T) {
	str := func(s string) *string { return &s }
	size := int64(1024)
	for _, c := range []struct {
		o    queueopen.Override
		f    queueopen.FormatOverride
		want string // "" for no file
		err  string
	}{
		{queueopen.Override{}, nil, "", ""},
		{queueopen.Override{KeyField: str("id")}, nil, "{\n  \"key_field\": \"id\"\n}\n", ""},
		{queueopen.Override{Required: []string{}, MaxSize: &size}, nil, "{\n  \"required\": [],\n  \"max_size\": 1024\n}\n", ""},
		{queueopen.Override{KeyField: str("")}, nil, "", "key_field is empty"},
		{queueopen.Override{KeyField: str("a"), OrderField: str("a")}, nil, "", "bad contract"},
		{queueopen.Override{MaxSize: new(int64)}, nil, "", "max_size is 0"},
		{queueopen.Override{SeqField: str("n")}, queueopen.FormatOverride{"key": []byte(`{"hash":true}`), "delimiter": []byte(`";"`),
			"include": []byte(`["*.csv"]`), "format": []byte(`"csv"`)},
			"{\n  \"seq_field\": \"n\",\n  \"format\": \"csv\",\n  \"include\": [\"*.csv\"],\n  \"delimiter\": \";\",\n  \"key\": {\"hash\":true}\n}\n", ""},
	} {
		got, err := queueopen.NewConfigText(c.o, c.f)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%+v %s: error %v, want one saying %q", c.o, c.f, err, c.err)
		case c.err == "" && (err != nil || string(got) != c.want):
			t.Errorf("%+v %s: %q, %v; want %q", c.o, c.f, got, err, c.want)
		}
	}
}

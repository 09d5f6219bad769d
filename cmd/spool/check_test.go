package main

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"
)

// status still prints over a spool.conf consume refuses, and warns of it.
func TestStatusWarnsOfBadConfig(t *testing.T) {
	q := newQueue(t)
	write(t, filepath.Join(q, "spool.conf"), `{"order_feild": "account"}`)
	r := cli(t, "status", q)
	if r.code != 0 || !strings.Contains(r.stdout, "inbox") || strings.Count(r.stderr, "\n") != 1 ||
		!strings.Contains(r.stderr, `unknown key "order_feild": did you mean "order_field"?`) || !strings.Contains(r.stderr, "Try: spool check "+q) {
		t.Errorf("status over a bad spool.conf: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
}

func TestConfigFileFromFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // "" for no file
		err  string
	}{
		{nil, "", ""},
		{[]string{"--key", "id"}, "{\n  \"key_field\": \"id\"\n}\n", ""},
		{[]string{"--require", "", "--max-size", "1KiB"}, "{\n  \"required\": [],\n  \"max_size\": 1024\n}\n", ""},
		{[]string{"--key", ""}, "", "key_field is empty"},
		{[]string{"--key", "a", "--order-key", "a"}, "", "bad contract"},
		{[]string{"--max-size", "0"}, "", "max_size is 0"},
	} {
		fs := flag.NewFlagSet("init", flag.ContinueOnError)
		cf := addContractFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		got, err := cf.configFile(nil)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v, want one saying %q", c.args, err, c.err)
		case c.err == "" && (err != nil || string(got) != c.want):
			t.Errorf("%q: %q, %v; want %q", c.args, got, err, c.want)
		}
	}
}

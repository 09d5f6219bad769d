package main

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestParseInterleaved(t *testing.T) {
	type got struct {
		pos        []string
		o, db      string
		v          bool
		n          int
		errContain string
	}
	tests := []struct {
		args []string
		want got
	}{
		{nil, got{}},
		{[]string{"DIR"}, got{pos: []string{"DIR"}}},
		{[]string{"DIR", "-o", "f"}, got{pos: []string{"DIR"}, o: "f"}},
		{[]string{"-o", "f", "DIR"}, got{pos: []string{"DIR"}, o: "f"}},
		{[]string{"--o=f", "DIR", "--db", "x.db", "T"}, got{pos: []string{"DIR", "T"}, o: "f", db: "x.db"}},
		{[]string{"DIR", "-v", "T"}, got{pos: []string{"DIR", "T"}, v: true}},
		{[]string{"DIR", "-v=false", "T", "--n", "3"}, got{pos: []string{"DIR", "T"}, n: 3}},
		{[]string{"DIR", "--", "-o", "--v"}, got{pos: []string{"DIR", "-o", "--v"}}},
		{[]string{"-", "DIR"}, got{pos: []string{"-", "DIR"}}},
		{[]string{"DIR", "-1"}, got{pos: []string{"DIR", "-1"}}},
		{[]string{"DIR", "-o", "-v"}, got{pos: []string{"DIR"}, o: "-v"}},
		{[]string{"DIR", "--note", "x"}, got{errContain: "not defined: -note"}},
		{[]string{"DIR", "-o"}, got{errContain: "needs an argument"}},
		{[]string{"DIR", "--n", "many"}, got{errContain: "invalid value"}},
		{[]string{"---o", "f"}, got{errContain: "bad flag syntax"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o := fs.String("o", "", "")
			db := fs.String("db", "", "")
			v := fs.Bool("v", false, "")
			n := fs.Int("n", 0, "")
			pos, err := parseInterleaved(fs, tt.args)
			if tt.want.errContain != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want.errContain) {
					t.Fatalf("err = %v, want one containing %q", err, tt.want.errContain)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(pos, tt.want.pos) || *o != tt.want.o || *db != tt.want.db || *v != tt.want.v || *n != tt.want.n {
				t.Errorf("pos=%q o=%q db=%q v=%v n=%d, want %+v", pos, *o, *db, *v, *n, tt.want)
			}
		})
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := parseInterleaved(fs, []string{"DIR", "-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: err = %v, want flag.ErrHelp", err)
	}
}

func TestParseSize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"1048576", 1 << 20, true}, {"512KiB", 512 << 10, true}, {"1MiB", 1 << 20, true},
		{"2gib", 2 << 30, true}, {"10 KiB", 10 << 10, true}, {"100B", 100, true},
		{"", 0, false}, {"-1", 0, false}, {"+1", 0, false}, {"1MB", 0, false}, {"1.5MiB", 0, false},
		{"KiB", 0, false}, {"9999999999GiB", 0, false}, {"0x10", 0, false},
	} {
		got, err := parseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestPositionalSynopsis(t *testing.T) {
	for in, want := range map[string]string{
		"DIR [-o FILE] [--sql] [--db PATH]":     "DIR",
		"DIR FILE... [--by USER] [--note TEXT]": "DIR FILE...",
		"[DIR] [--db PATH] [contract flags]":    "[DIR]",
		"DIR THRESHOLD":                         "DIR THRESHOLD",
		"":                                      "",
	} {
		if got := positionalSynopsis(in); got != want {
			t.Errorf("positionalSynopsis(%q) = %q, want %q", in, got, want)
		}
	}
}

package cmdline

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
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
		{[]string{"DIR", "--note", "x"}, got{errContain: "unknown flag --note"}},
		{[]string{"DIR", "--dv", "x"}, got{errContain: "unknown flag --dv"}}, // too short to guess
		{[]string{"DIR", "--Db", "x"}, got{errContain: "unknown flag --Db (did you mean --db?)"}},
		{[]string{"DIR", "-o"}, got{errContain: "-o needs a value"}},
		{[]string{"DIR", "--n", "many"}, got{errContain: `-n "many": want a whole number`}},
		{[]string{"DIR", "--v=maybe"}, got{errContain: `-v "maybe": want true or false`}},
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
			pos, err := Parse(fs, tt.args)
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
	if _, err := Parse(fs, []string{"DIR", "-h"}); !errors.Is(err, flag.ErrHelp) {
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
		got, err := ParseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestSynopsis(t *testing.T) {
	for in, want := range map[string]string{
		"DIR [-o FILE] [--sql] [--db PATH]":     "DIR",
		"DIR FILE... [--by USER] [--note TEXT]": "DIR FILE...",
		"[DIR] [--db PATH] [contract flags]":    "[DIR]",
		"DIR THRESHOLD":                         "DIR THRESHOLD",
		"":                                      "",
	} {
		if got := Synopsis(in); got != want {
			t.Errorf("Synopsis(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFlagTypos: a flag mistyped is named with the one it was likely
// meant to be, and a bad value says what the flag wants.
func TestFlagTypos(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("concurrency", 4, "")
	fs.Duration("shutdown-timeout", 0, "")
	fs.Bool("watch", false, "")
	fs.Float64("rate-burst", 0, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--concurency", "4"}, "unknown flag --concurency (did you mean --concurrency?)"},     // a letter missing
		{[]string{"--concurrrency", "4"}, "unknown flag --concurrrency (did you mean --concurrency?)"}, // doubled
		{[]string{"--wacth"}, "unknown flag --wacth (did you mean --watch?)"},                          // swapped
		{[]string{"--Watch"}, "unknown flag --Watch (did you mean --watch?)"},
		{[]string{"--polling"}, "unknown flag --polling"},
		{[]string{"--shutdown-timeout", "5"}, `--shutdown-timeout "5": want a duration with its unit`},
		{[]string{"--rate-burst", "many"}, `--rate-burst "many": want a number`},
		{[]string{"--concurrency=4x"}, `--concurrency "4x": want a whole number`},
	} {
		_, err := Parse(fs, c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want one containing %q", c.args, err, c.want)
		}
		if err != nil && strings.Contains(c.want, "unknown flag --polling") && strings.Contains(err.Error(), "did you mean") {
			t.Errorf("%q: %v: no flag is near enough to suggest", c.args, err)
		}
	}
}

package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
)

// parseInterleaved parses args into fs with flags allowed anywhere: before,
// between or after the positional arguments, which it returns in order.
// Everything after "--" is positional; a lone "-" is positional (it may
// name stdin), and so is a negative number such as "-1" unless a flag has
// that name, so that it is refused for what it is, a bad value. A flag that takes a value consumes the next argument unless
// written as -name=value; boolean flags never consume one. Unknown flags are
// left for fs.Parse to report.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' || isNegativeNumber(fs, a) {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil || isBoolFlag(f) {
			continue
		}
		if i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if err := fs.Parse(flags); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		// Only a malformed flag list gets here (fs.Parse stops early only at
		// a non-flag, and every value was paired with its flag).
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return pos, nil
}

func isNegativeNumber(fs *flag.FlagSet, a string) bool {
	if _, err := strconv.ParseFloat(a, 64); err != nil {
		return false
	}
	return fs.Lookup(a[1:]) == nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// sizeFlag is a byte count given as plain bytes or with a binary suffix:
// 1048576, 512KiB, 1MiB, 2GiB (suffixes case-insensitive; B allowed).
type sizeFlag struct{ n int64 }

func (s *sizeFlag) String() string {
	if s == nil {
		return "0"
	}
	return strconv.FormatInt(s.n, 10)
}

func (s *sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	s.n = n
	return nil
}

func parseSize(v string) (int64, error) {
	t := strings.TrimSpace(v)
	mult := int64(1)
	lower := strings.ToLower(t)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"b", 1}} {
		if strings.HasSuffix(lower, u.suffix) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || t == "" || t[0] == '+' {
		return 0, fmt.Errorf("size %q: want a non-negative number of bytes, optionally with KiB, MiB or GiB", v)
	}
	if n > (1<<63-1)/mult {
		return 0, fmt.Errorf("size %q is too large", v)
	}
	return n * mult, nil
}

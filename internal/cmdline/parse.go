package cmdline

import (
	"flag"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/spelling"
)

// Parse parses args into fs with flags allowed anywhere: before,
// between or after the positional arguments, which it returns in order.
// Everything after "--" is positional; a lone "-" is positional (it may
// name stdin), and so is a negative number such as "-1" unless a flag has
// that name, so that it is refused for what it is, a bad value. A flag that takes a value consumes the next argument unless
// written as -name=value; boolean flags never consume one. Unknown flags are
// left for fs.Parse to report.
func Parse(fs *flag.FlagSet, args []string) ([]string, error) {
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
		return nil, flagError(fs, err)
	}
	if fs.NArg() > 0 {
		// Only a malformed flag list gets here (fs.Parse stops early only at
		// a non-flag, and every value was paired with its flag).
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return pos, nil
}

// The messages of package flag for an unknown flag and a bad value.
var (
	unknownFlagRe = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)
	badValueRe    = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-+([^:]+): (.*)$`)
	noValueRe     = regexp.MustCompile(`^flag needs an argument: -+(.+)$`)
)

// flagError rewrites package flag's errors in the command line's own
// terms: flags written as the usage lines write them, an unknown flag with the one it is likely
// a typo of, and a bad value with what the flag wants instead of
// "parse error".
func flagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if m := unknownFlagRe.FindStringSubmatch(msg); m != nil {
		if near := nearestFlag(fs, m[1]); near != "" {
			return fmt.Errorf("unknown flag %s (did you mean %s?)", Dashed(m[1]), Dashed(near))
		}
		return fmt.Errorf("unknown flag %s", Dashed(m[1]))
	}
	if m := noValueRe.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%s needs a value", Dashed(m[1]))
	}
	m := badValueRe.FindStringSubmatch(msg)
	if m == nil {
		return err
	}
	value, name, why := m[1], m[2], m[3]
	if f := fs.Lookup(name); f != nil && why == "parse error" {
		if g, ok := f.Value.(flag.Getter); ok {
			switch g.Get().(type) {
			case time.Duration:
				why = "want a duration with its unit, such as 500ms, 90s, 5m or 1h30m"
			case int, int64, uint, uint64:
				why = "want a whole number"
			case float64:
				why = "want a number"
			case bool:
				why = "want true or false"
			}
		}
	}
	return fmt.Errorf("%s %q: %s", Dashed(name), value, why)
}

// Dashed writes a flag as the usage lines do: -o, --db.
func Dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// nearestFlag returns the flag of fs that name is most likely a typo of:
// the same but for case, or within two edits (a letter missing, doubled,
// swapped or wrong) of a name at least four letters long; "" for none.
func nearestFlag(fs *flag.FlagSet, name string) string {
	best, bestD := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		if strings.EqualFold(f.Name, name) {
			best, bestD = f.Name, -1
			return
		}
		if len(f.Name) < 4 {
			return
		}
		if d := spelling.Distance(f.Name, name); d < bestD {
			best, bestD = f.Name, d
		}
	})
	return best
}

// Given reports whether the command line set the flag name, as opposed
// to leaving it at its default: an empty or zero value written on purpose
// is refused where the default is not.
func Given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
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

// Size is a byte count given as plain bytes or with a binary suffix:
// 1048576, 512KiB, 1MiB, 2GiB (suffixes case-insensitive; B allowed).
type Size struct{ N int64 }

// String is the count in bytes, for the flag's default.
func (s *Size) String() string {
	if s == nil {
		return "0"
	}
	return strconv.FormatInt(s.N, 10)
}

// Set takes a count as ParseSize reads it.
func (s *Size) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	s.N = n
	return nil
}

// ParseSize reads a byte count as Size takes it; an error names v and
// what is wanted.
func ParseSize(v string) (int64, error) {
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

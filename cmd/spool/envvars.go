package main

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/spoolq/spool/handler"
	"github.com/spoolq/spool/internal/spelling"
)

// This file is the one table of the SPOOL_ variables: those read as
// settings (a flag of a command with env, as envName spells it: applyEnv
// reads them), and the others spool knows of. A name that is neither is a
// typo that would be ignored without a word (SPOOL_MINAGE for
// SPOOL_MIN_AGE): consume warns of it at start and spool check counts it
// as a problem, each naming the closest real name.

// flagVar returns the variable that sets the flag name of a command with
// env, and false for a flag no variable sets: those whose variable is a
// message's value that a handler hands its program (handler.Vars:
// SPOOL_SEQ, SPOOL_AMOUNT), which a program run by --exec that runs spool
// itself would otherwise take for --seq and --amount.
func flagVar(name string) (string, bool) {
	v := envName(name)
	return v, !slices.Contains(handler.Vars, v)
}

// otherVarPrefixes are the SPOOL_ names that are not settings and are no
// typo: the tests' switches and services (internal/testenv), and
// ledger.UnfencedEnv.
var otherVarPrefixes = []string{"SPOOL_TEST_", "SPOOL_E2E_"}

// knownVars returns every SPOOL_ variable spool reads or sets, each with
// what it is: the settings of the commands with env, then the variables
// the handlers set for their programs.
func knownVars() map[string]string {
	known := map[string]string{}
	for _, c := range commands {
		if !c.env {
			continue
		}
		for _, f := range commandFlags(c) {
			if v, ok := flagVar(f.Name); ok {
				if _, seen := known[v]; !seen {
					known[v] = "for " + dashed(f.Name)
				}
			}
		}
	}
	for _, v := range handler.Vars {
		known[v] = "which spool sets for the programs of --exec and --on-dead-letter"
	}
	return known
}

// unknownVars returns one line for each variable of environ (NAME=VALUE
// entries, as os.Environ gives them) named SPOOL_ in any case that spool
// neither reads nor sets, with the known name it is closest to, in name
// order.
func unknownVars(environ []string) []string {
	known := knownVars()
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(strings.ToUpper(name), "SPOOL_") {
			continue
		}
		if _, ok := known[name]; ok || slices.ContainsFunc(otherVarPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		line := fmt.Sprintf("%s is not a setting of spool: it is ignored", name)
		if near := nearestVar(known, name); near != "" {
			line += fmt.Sprintf(" (did you mean %s, %s?)", near, known[near])
		}
		out = append(out, line)
	}
	sort.Strings(out)
	return out
}

// nearestVar returns the known name that name is most likely a typo of:
// the same but for case, or within three edits (an underscore missing or
// doubled, a letter swapped or wrong) of the part after SPOOL_; "" for
// none.
func nearestVar(known map[string]string, name string) string {
	best, bestD := "", 4
	for _, k := range slices.Sorted(maps.Keys(known)) {
		if strings.EqualFold(k, name) {
			return k
		}
		if d := spelling.Distance(strings.ToUpper(name), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/handler"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/report"
)

// This file holds the refusals of mistakes that would otherwise cost
// data or hang: each is exit 2 before anything changes.

// dbValue is --db's flag.Value. It refuses at parse time what can never
// name a ledger: an empty value (which would quietly mean the default
// file) and a URL whose scheme no backend has (which would be taken for a
// file path and create a file of that name).
type dbValue struct{ s *string }

func (v dbValue) String() string {
	if v.s == nil {
		return ""
	}
	return *v.s
}

// urlSchemeRe matches a DSN written as a URL: scheme://...
var urlSchemeRe = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

func (v dbValue) Set(s string) error {
	if s == "" {
		return errors.New("empty: give a file path, sqlite:PATH or a postgres:// URL, or leave --db out for DIR/" + queueopen.DefaultLedger)
	}
	if m := urlSchemeRe.FindStringSubmatch(s); m != nil && !ledger.HasScheme(s) {
		var known []string
		for _, k := range ledger.Schemes() {
			if k != ledger.FileScheme {
				known = append(known, k+"://")
			}
		}
		return fmt.Errorf("unknown scheme %q: want %s, sqlite:PATH or a file path", m[1], strings.Join(known, ", "))
	}
	*v.s = s
	return nil
}

// checkListenHost refuses a --listen host that cannot name an address:
// one that looks like an IP address but is none ("1.2.3.4.5"), or a name
// the resolver says does not exist. Either is a typo (exit 2), not a
// failure to listen.
func checkListenHost(ctx context.Context, addr, host string) error {
	if host == "" || net.ParseIP(host) != nil || host == "localhost" {
		return nil
	}
	if strings.Trim(host, "0123456789.") == "" {
		return &usageError{msg: fmt.Sprintf("--listen %q: %q is not an IP address", addr, host)}
	}
	if _, err := net.DefaultResolver.LookupHost(ctx, host); err != nil {
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			return &usageError{msg: fmt.Sprintf("--listen %q: no such host %q", addr, host)}
		}
	}
	return nil
}

// knownReasons are the reasons a dead letter can have: the consumer's
// (spool.Reason) and report's "unknown" for a file without a record.
var knownReasons = []string{
	string(spool.ReasonParse), string(spool.ReasonMissingField), string(spool.ReasonInvalidField),
	string(spool.ReasonNotRegular), string(spool.ReasonTooLarge), string(spool.ReasonUnreadable),
	string(spool.ReasonHandler), string(spool.ReasonRetriesExhausted), report.ReasonUnknown,
}

// checkReason refuses a replay --reason that selected nothing and that no
// dead letter could ever have: a typo, which must not pass for "nothing
// to replay". The refusal lists the reasons of the dead letters in error/
// now and every reason there is.
func checkReason(ctx context.Context, d *queue.Dir, l *ledger.DB, reason string) error {
	if slices.Contains(knownReasons, reason) {
		return nil
	}
	now, err := reasonsNow(ctx, d, l)
	if err != nil {
		return err
	}
	return &usageError{msg: fmt.Sprintf("--reason %q: no dead letter has it and it is no reason spool gives; in error/ now: %s; the reasons: %s",
		reason, now, strings.Join(knownReasons, ", "))}
}

// noSuchReason refuses a discard --reason that selected nothing: no dead
// letter in error/ has it. Discarding is for what is there; the refusal
// lists the reasons error/ holds now and every reason there is.
func noSuchReason(ctx context.Context, d *queue.Dir, l *ledger.DB, reason string) error {
	now, err := reasonsNow(ctx, d, l)
	if err != nil {
		return err
	}
	return &usageError{msg: fmt.Sprintf("--reason %q: no dead letter in error/ has it; in error/ now: %s; the reasons: %s",
		reason, now, strings.Join(knownReasons, ", "))}
}

// reasonsNow lists the reasons of the dead letters in error/, sorted,
// or says none.
func reasonsNow(ctx context.Context, d *queue.Dir, l *ledger.DB) (string, error) {
	rows, err := report.Errors(ctx, d, l)
	if err != nil {
		return "", err
	}
	var have []string
	for _, r := range rows {
		if !slices.Contains(have, r.Reason) {
			have = append(have, r.Reason)
		}
	}
	slices.Sort(have)
	if len(have) == 0 {
		return "none", nil
	}
	return strings.Join(have, ", "), nil
}

// checkExec refuses, before anything is claimed, an --exec command whose
// program cannot be found or executed (handler.CheckCommand).
func checkExec(command string) error {
	if err := handler.CheckCommand(command); err != nil {
		return &usageError{msg: fmt.Sprintf("--exec %q: %v", command, strings.TrimPrefix(err.Error(), "check command: "))}
	}
	return nil
}

var _ flag.Value = dbValue{}

// maxConfigSize bounds what readRegular reads of spool.conf: a contract
// is a few hundred bytes; a file of megabytes is a mistake.
const maxConfigSize = 1 << 20

// readRegular reads the regular file at path, refusing anything else
// without blocking: a FIFO is opened non-blocking and refused (a plain
// read would wait for a writer forever, hanging a nightly fsck), a
// symlink is followed as a path would be, a directory or device refused.
func readRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("is a %s, not a regular file", fileKind(fi.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("larger than %d bytes: not a contract", maxConfigSize)
	}
	return data, nil
}

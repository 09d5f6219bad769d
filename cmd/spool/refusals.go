package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"regexp"
	"strings"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queueopen"
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

var _ flag.Value = dbValue{}

package endpoint

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// ListenError is a refusal of the endpoints' options (CheckListen),
// worded as the command line's flags. Alone says the fault is in what an
// option names (a host that does not exist), not in the options'
// combination, which a command's help explains.
type ListenError struct {
	Msg   string
	Alone bool
}

func (e *ListenError) Error() string { return e.Msg }

// ListenOptions are the endpoints' options as a program's user gives
// them (spool serve's and consume's --listen, --metrics-refresh,
// --tls-cert, --tls-key), for CheckListen.
type ListenOptions struct {
	Addr              string
	Refresh           time.Duration
	CertFile, KeyFile string
	// Given reports whether the user gave an option, by flag name
	// (listen, tls-cert, tls-key), for those given empty; nil: none was.
	Given func(name string) bool
	// Need: the endpoints are the program's point (spool serve), so an
	// address is required.
	Need bool
}

// CheckListen refuses, before anything listens, endpoints' options that
// cannot be right, the first wrong in this order: no address where one
// is needed, given empty, or TLS files without one; an address that is
// not host:port, a port that is no number from 0 to 65535, a host that
// looks like an IP address but is none or that the resolver says does
// not exist (Alone: a typo, not a failure to listen); a refresh not
// above 0; a certificate without its key or the other way round, both
// given empty, or files LoadCertFiles refuses. It returns the
// certificate files loaded, nil without TLS, and *ListenError refusals.
func CheckListen(ctx context.Context, o ListenOptions) (*CertFiles, error) {
	given := func(name string) bool { return o.Given != nil && o.Given(name) }
	refuse := func(format string, args ...any) error { return &ListenError{Msg: fmt.Sprintf(format, args...)} }
	if o.Addr == "" {
		switch {
		case o.Need:
			return nil, refuse("--listen ADDR is required")
		case given("listen"):
			return nil, refuse("--listen is empty: want host:port (127.0.0.1:9464 for this host alone, :9464 for every interface)")
		case given("tls-cert") || given("tls-key"):
			return nil, refuse("--tls-cert and --tls-key need --listen")
		}
		return nil, nil
	}
	host, port, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, refuse("--listen %q: want host:port (127.0.0.1:9464 for this host alone, :9464 for every interface): %v", o.Addr, err)
	}
	// A port that is no number (a service name is looked up) or out of
	// range is a typo, not a failure to listen.
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return nil, refuse("--listen %q: the port %q is not a number from 0 to 65535", o.Addr, port)
	}
	if err := checkHost(ctx, o.Addr, host); err != nil {
		return nil, err
	}
	if o.Refresh <= 0 {
		return nil, refuse("--metrics-refresh %v: want a duration above 0", o.Refresh)
	}
	switch {
	case o.CertFile == "" && o.KeyFile == "":
		if given("tls-cert") || given("tls-key") {
			return nil, refuse("--tls-cert and --tls-key are empty: want the PEM files' paths")
		}
		return nil, nil
	case o.CertFile == "":
		return nil, refuse("--tls-key needs --tls-cert")
	case o.KeyFile == "":
		return nil, refuse("--tls-cert needs --tls-key")
	}
	c, err := LoadCertFiles(o.CertFile, o.KeyFile)
	if err != nil {
		return nil, refuse("--tls-cert: %v", err)
	}
	return c, nil
}

// checkHost refuses a host of addr that cannot name an address: one that
// looks like an IP address but is none ("1.2.3.4.5"), or a name the
// resolver says does not exist.
func checkHost(ctx context.Context, addr, host string) error {
	if host == "" || net.ParseIP(host) != nil || host == "localhost" {
		return nil
	}
	if strings.Trim(host, "0123456789.") == "" {
		return &ListenError{Msg: fmt.Sprintf("--listen %q: %q is not an IP address", addr, host), Alone: true}
	}
	if _, err := net.DefaultResolver.LookupHost(ctx, host); err != nil {
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			return &ListenError{Msg: fmt.Sprintf("--listen %q: no such host %q", addr, host), Alone: true}
		}
	}
	return nil
}

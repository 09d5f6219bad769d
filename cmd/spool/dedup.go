package main

import (
	"flag"

	"github.com/spoolq/spool/window"
)

// dedupFlag is consume's --dedup: the Redis dedup window in front of the
// ledger (docs/DESIGN.md, "The Redis dedup window").
type dedupFlag struct {
	url string
	w   *window.Redis
}

// addDedupFlag registers --dedup on fs.
func addDedupFlag(fs *flag.FlagSet) *dedupFlag {
	f := &dedupFlag{}
	fs.StringVar(&f.url, "dedup", "", "a dedup window in Redis in front of the ledger, `redis://HOST:PORT/DB[?ttl=1h&inflight=30s]`: duplicates inside it are absorbed without a ledger write, and a key in flight on another host waits (the ledger stays the truth; Redis down: ledger only)")
	return f
}

// check validates the URL, before anything is opened: a bad one is a
// usage error.
func (f *dedupFlag) check(e *env) error {
	if f.url == "" {
		return nil
	}
	w, err := window.Open(f.url)
	if err != nil {
		return e.Usage("--dedup %q: %v", f.url, window.ErrBadURL)
	}
	f.w = w
	return nil
}

// close closes the window's connections, if any.
func (f *dedupFlag) close() {
	if f.w != nil {
		_ = f.w.Close() // connections only: nothing to flush
	}
}

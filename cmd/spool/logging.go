package main

import (
	"flag"
	"io"
	"log/slog"
	"strings"

	"github.com/spoolq/spool"
)

// logFlags are consume's logging flags.
type logFlags struct {
	format, level string
	verbose       bool
}

func addLogFlags(fs *flag.FlagSet) *logFlags {
	f := &logFlags{}
	fs.StringVar(&f.format, "log-format", "text", "`FORMAT` of the log records on stderr: text (key=value) or json (one object a line)")
	fs.StringVar(&f.level, "log-level", "info", "least `LEVEL` logged: debug (adds a line per message), info (dead letters, recoveries, retries), warn or error")
	fs.BoolVar(&f.verbose, "v", false, "the same as --log-level info, the default; kept for old scripts")
	return f
}

// levels are the names --log-level takes: exactly these, so that a typo is
// a usage error rather than slog's "info+2" arithmetic.
var levels = map[string]slog.Level{
	"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
}

// check validates the flags.
func (f *logFlags) check(e *env) error {
	if f.format != "text" && f.format != "json" {
		return e.Usage("--log-format %q: want text or json", f.format)
	}
	if _, ok := levels[f.level]; !ok {
		if _, lower := levels[strings.ToLower(f.level)]; lower {
			return e.Usage("--log-level %q: want debug, info, warn or error, in lower case", f.level)
		}
		return e.Usage("--log-level %q: want debug, info, warn or error", f.level)
	}
	return nil
}

func (f *logFlags) json() bool { return f.format == "json" }

// logger returns the logger writing to w.
func (f *logFlags) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: levels[f.level]}
	if f.json() {
		opts.ReplaceAttr = durationSeconds
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// logDelivery is the debug line of one message reaching done/ or error/:
// the per-message record the default level leaves out, with the trace,
// tenant and schema version of the contract's headers.
func logDelivery(l *slog.Logger, d *spool.Delivery, r spool.Result, stored string) {
	msgID := ""
	var headers []any
	if d.Message != nil {
		msgID, headers = d.Message.MsgID, d.Message.Headers.LogArgs()
	}
	l.Debug("delivered", append([]any{"file", d.File, "stored", stored, "outcome", string(r.Outcome), "msg_id", msgID}, headers...)...)
}

// durationSeconds writes a duration in a JSON record as seconds, a number,
// as every --json output does: slog's default, nanoseconds, reads as a
// billion seconds to a tool that expects seconds.
func durationSeconds(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.Float64(a.Key, a.Value.Duration().Seconds())
	}
	return a
}

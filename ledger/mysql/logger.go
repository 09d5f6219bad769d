package mysql

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync/atomic"

	driver "github.com/go-sql-driver/mysql"
)

// driverLog receives the lines the MySQL driver writes of its own; nil
// (the default) discards them.
var driverLog atomic.Pointer[slog.Logger]

// SetLogger routes the lines the MySQL driver writes of its own, which by
// default go to stderr as plain text ("[mysql] ... closing bad idle
// connection: EOF", "invalid connection", "unexpected EOF"), to l
// instead: each a record at level Warn with client=mysql, so that a
// program's log stays in its one format (spool consume --log-format json).
// A nil l discards them, as the ledger's connections do until it is
// called. The driver's default logger is the process's: a program calls
// this once, at its start.
func SetLogger(l *slog.Logger) {
	driverLog.Store(l)
	_ = driver.SetLogger(driverLogger{}) // fails only for nil
}

// driverLogger is the driver's Logger on driverLog. Every connection the
// ledger opens carries it (Config), whenever SetLogger is called.
type driverLogger struct{}

// sourcePrefix is the "file.go:123 " the driver puts before a line.
var sourcePrefix = regexp.MustCompile(`^\S+\.go:\d+ `)

func (driverLogger) Print(v ...any) {
	l := driverLog.Load()
	if l == nil {
		return
	}
	msg := sourcePrefix.ReplaceAllString(strings.TrimSpace(fmt.Sprint(v...)), "")
	l.Warn(msg, "client", "mysql")
}

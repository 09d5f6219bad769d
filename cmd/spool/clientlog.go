package main

import (
	"io"
	"log"
	"log/slog"
	"time"

	"github.com/spoolq/spool/internal/clientlog"
	"github.com/spoolq/spool/ledger/mysql"
	"github.com/spoolq/spool/relay"
	"github.com/spoolq/spool/window"
)

// The clients spool links write lines of their own (go-redis, the MySQL
// driver, nats.go, the standard log package): the program routes them,
// once at its start (routeClientLogs), into the logger of the command
// that runs (clientLogs.Use: consume's and serve's, in their format; a
// text logger on stderr before that and for the other commands), holding
// back the repeats (package clientlog).

// clientLogEvery is how often one distinct line of a client may be
// logged.
const clientLogEvery = 5 * time.Second

// clientLogs is the process's one router of the clients' lines. Until
// routeClientLogs it discards them, as do the clients it is not given to.
var clientLogs = clientlog.New(slog.New(slog.DiscardHandler), clientLogEvery)

// routeClientLogs points every client's own logger at clientLogs, whose
// lines go to stderr as text records at level Warn until a command gives
// its own logger. It sets process-wide state of those libraries, so only
// main calls it, once, before any command runs; tests that call run do
// not.
func routeClientLogs(stderr io.Writer) {
	clientLogs.Use(slog.New(slog.NewTextHandler(&stderrWriter{w: stderr}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	l := slog.New(clientLogs)
	window.SetLogger(l)
	mysql.SetLogger(l)
	relay.SetLogger(l)
	log.SetFlags(0)
	log.SetOutput(&clientlog.LogLines{L: l})
}

package relay

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	amqp "github.com/rabbitmq/amqp091-go"
)

// clientLog receives what the brokers' clients would say of their own
// (SetLogger); nil, the default, discards it.
var clientLog atomic.Pointer[slog.Logger]

// SetLogger routes what the brokers' clients say of their own to l, each
// line a record with client=nats or client=amqp: the NATS connections'
// asynchronous errors (which nats.go writes to stderr as plain text when
// no handler is set: a publish the server's permissions refuse, a slow
// consumer), their disconnections (Warn) and reconnections (Info), and
// the AMQP client's log (amqp091-go's Logger, Warn; its "[debug]" lines
// Debug). A nil l discards them, as the targets do until it is called.
// amqp091-go has one logger for the whole process: a program calls this
// once, at its start.
func SetLogger(l *slog.Logger) {
	clientLog.Store(l)
	amqp.SetLogger(amqpLogger{})
}

// logClient logs one line of a client's own, if SetLogger was given a
// logger.
func logClient(level slog.Level, client, msg string, args ...any) {
	if l := clientLog.Load(); l != nil {
		l.Log(context.Background(), level, msg, append([]any{"client", client}, args...)...)
	}
}

// amqpLogger is amqp091-go's Logging on clientLog.
type amqpLogger struct{}

func (amqpLogger) Printf(format string, v ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, v...))
	level := slog.LevelWarn
	if rest, ok := strings.CutPrefix(msg, "[debug] "); ok {
		msg, level = rest, slog.LevelDebug
	}
	logClient(level, "amqp", msg)
}

// natsLogging are the options of a NATS connection that route what it
// says of its own to clientLog instead of stderr.
func natsLogging() []nats.Option {
	return []nats.Option{
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				logClient(slog.LevelWarn, "nats", err.Error(), "subject", sub.Subject)
				return
			}
			logClient(slog.LevelWarn, "nats", err.Error())
		}),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil {
				logClient(slog.LevelWarn, "nats", "disconnected: "+err.Error(), "server", nc.ConnectedUrlRedacted())
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			logClient(slog.LevelInfo, "nats", "reconnected", "server", nc.ConnectedUrlRedacted())
		}),
	}
}

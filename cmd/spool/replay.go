package main

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

var replayCommand = &command{
	name:    "replay",
	args:    "DIR FILE... [--by USER] [--note TEXT] [--db PATH]",
	summary: "move dead letters from error/ back to inbox/, all or nothing, recorded in the ledger",
	help: `
Moves each named file from error/ back to inbox/ to be consumed again, and
records every replay in the ledger (who, when, why). All or nothing: a name
with / or .. (exit 2) or a name not in error/ (exit 1) changes nothing.
A name already in inbox/ gets a ~N suffix.

Prints one line per file: replayed NAME -> inbox/NEWNAME`,
}

func init() { replayCommand.run = runReplay }

func runReplay(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	by := flags.String("by", "", "who replays, for the ledger (default: the OS user)")
	note := flags.String("note", "", "why, for the ledger")
	db := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return e.usage("missing DIR")
	}
	if len(pos) == 1 {
		return e.usage("missing FILE")
	}
	dir, names := pos[0], pos[1:]
	// Path-like names are refused, all of them, before anything is opened.
	for _, n := range names {
		if err := queue.CheckName(n); err != nil {
			return err
		}
	}
	who := *by
	if who == "" {
		who = osUser()
	}
	d, err := openQueue(dir)
	if err != nil {
		return err
	}
	defer closeQueue(d, &err)
	// The ledger is opened before anything moves, so that a replay is never
	// done without the means to record it.
	l, err := openLedger(ctx, dir, *db)
	if err != nil {
		return err
	}
	defer closeLedger(l, &err)
	done, rerr := d.Replay(names)
	// Replay returns moved files along with an error only when the final
	// directory sync failed: they did move, so they are still recorded.
	now := time.Now()
	for _, r := range done {
		if err := l.RecordReplay(ctx, ledger.Replay{File: r.File, NewName: r.NewName, Ino: r.Ino, By: who, Note: *note, At: now}); err != nil {
			return fmt.Errorf("%s was replayed as inbox/%s but not recorded: %w", r.File, r.NewName, err)
		}
		fmt.Fprintf(e.stdout, "replayed %s -> inbox/%s\n", r.File, r.NewName)
	}
	return rerr
}

// osUser names the user running spool: the OS account, else $USER, else
// the numeric uid.
func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "uid:" + strconv.Itoa(os.Getuid())
}

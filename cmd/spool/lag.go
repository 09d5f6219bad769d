package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spoolq/spool/queue"
)

var lagCommand = &command{
	name:    "lag",
	args:    "DIR THRESHOLD",
	summary: "print inbox=N processing=N error=N; exit 1 when inbox > THRESHOLD",
	help: `
Prints exactly one line, inbox=N processing=N error=N, counting messages
(NAME.json, not starting with '.'), and exits 1 when inbox holds more than
THRESHOLD, a non-negative integer. It reads directory names only, never file
contents or the ledger, so it stays cheap on a million waiting files.`,
}

func init() { lagCommand.run = runLag }

func runLag(_ context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := e.positionals(pos, 2, 2, "DIR", "THRESHOLD"); err != nil {
		return err
	}
	threshold, perr := strconv.ParseUint(pos[1], 10, 64)
	if perr != nil {
		return e.usage("THRESHOLD %q: want a non-negative integer", pos[1])
	}
	d, err := openQueue(pos[0])
	if err != nil {
		return err
	}
	defer closeQueue(d, &err)
	var n [3]int
	for i, s := range []queue.Stage{queue.Inbox, queue.Processing, queue.Error} {
		if n[i], err = d.Count(s); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stdout, "inbox=%d processing=%d error=%d\n", n[0], n[1], n[2])
	if uint64(n[0]) > threshold {
		return errCheckFailed
	}
	return nil
}

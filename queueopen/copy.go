package queueopen

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spoolq/spool/queue"
)

// CopyMessages enqueues the message files of the directory src into d's
// inbox/, in name order, each atomically as a new delivery (queue.Dir.
// Enqueue: a name already there gets a ~N suffix): those d's format
// takes (spool.conf's include; *.json by default), following symbolic
// links as cp does. A source that cannot be a delivery (not a regular
// file, unreadable, gone) is skipped, told to onSkip with why (the
// cause alone: the path is onSkip's first argument), and counted; a
// failure to write into the queue stops the copy. spool init --from
// does it; a src that cannot be listed is the flag's error, "--from: ...".
func CopyMessages(d *queue.Dir, src string, onSkip func(path string, why error)) (copied, skipped int, err error) {
	entries, err := os.ReadDir(src)
	if err != nil {
		return 0, 0, fmt.Errorf("--from: %w", err)
	}
	skip := func(path string, why error) {
		var pe *fs.PathError
		if errors.As(why, &pe) {
			why = pe.Err
		}
		if onSkip != nil {
			onSkip(path, why)
		}
		skipped++
	}
	for _, ent := range entries {
		if !d.Takes(ent.Name()) { // the names of the queue's format (*.json by default)
			continue
		}
		path := filepath.Join(src, ent.Name())
		fi, err := os.Stat(path) // follows a symlink, as cp does
		if err != nil {
			skip(path, err)
			continue
		}
		if !fi.Mode().IsRegular() {
			skip(path, fmt.Errorf("not a regular file (%s)", queue.ModeType(fi.Mode())))
			continue
		}
		if _, err := d.Enqueue(path); err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, queue.ErrNotRegular) {
				skip(path, err)
				continue
			}
			return copied, skipped, err
		}
		copied++
	}
	return copied, skipped, nil
}

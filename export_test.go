package spool

import "github.com/spoolq/spool/queue"

// WriteFilesFunc is how a consumer writes a batch file's dead letters
// into a stage (Consumer.writeFiles).
type WriteFilesFunc = func(queue.Stage, []queue.StageFile) ([]queue.StoredCopy, error)

// WrapWriteFiles puts wrap in front of c's writes of dead letters: a test
// injects a fault there.
func WrapWriteFiles(c *Consumer, wrap func(next WriteFilesFunc) WriteFilesFunc) {
	c.writeFiles = wrap(c.writeFiles)
}

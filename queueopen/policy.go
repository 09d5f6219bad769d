package queueopen

import (
	"path/filepath"

	"github.com/spoolq/spool/task"
)

// ApprovalPolicy is the approval section of the spool.conf of the queue
// at dir, read strictly with the rest of the file (ReadConfig), and the
// file's path; task.NoPolicy (Set false) when the file or the section is
// missing. A section task.ParsePolicy refuses is an invalid *ConfigError.
// It is what the ledger adopts the first time it sees one
// (task.Service.QueuePolicy); from then on the ledger's policy is the
// queue's.
func ApprovalPolicy(dir string) (task.Policy, string, error) {
	path := filepath.Join(dir, ConfigName)
	c, err := ReadConfig(dir) // every key checked, "approval" among them
	if err != nil || c == nil || c.Approval == nil {
		return task.NoPolicy, path, err
	}
	p, err := task.ParsePolicy(c.Approval)
	if err != nil {
		return task.NoPolicy, path, &ConfigError{Path: path, Err: err, Invalid: true}
	}
	return p, path, nil
}

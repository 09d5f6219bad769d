package console

import (
	"crypto/subtle"
	"fmt"
	"os"

	"github.com/spoolq/spool/task"
)

// LoadTokens reads the token file at path (task.ParseTokens: lines "NAME
// ROLE SHA256-OF-TOKEN", # comments). A file that cannot be read, that
// has a malformed line, or that holds no identity is an error naming it.
func LoadTokens(path string) (task.Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close() // read only
	ts, err := task.ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("token file %s: no identity (want lines NAME ROLE SHA256-OF-TOKEN)", path)
	}
	return ts, nil
}

// constantEqual compares a and b in time that depends on their lengths
// only.
func constantEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

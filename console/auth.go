package console

import (
	"crypto/subtle"
	"fmt"

	"github.com/spoolq/spool/task"
)

// LoadTokens reads the token file at path (task.ReadTokenFile: lines
// "NAME ROLE SHA256-OF-TOKEN [os=USER]", # comments; a regular file that
// only its owner may change and not every user may read). A file that
// cannot be read, is not safe, has a malformed line, or holds no identity
// is an error naming it.
func LoadTokens(path string) (task.Tokens, error) {
	ts, err := task.ReadTokenFile(path)
	if err != nil {
		return nil, err
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("token file %s: no identity (want lines NAME ROLE SHA256-OF-TOKEN [os=USER])", path)
	}
	return ts, nil
}

// constantEqual compares a and b in time that depends on their lengths
// only.
func constantEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

package handler

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/spoolq/spool"
)

// TestVarsListed: every SPOOL_ variable Exec and Notifier add to a
// program's environment is in Vars, which the CLI keeps out of its flag
// variables.
func TestVarsListed(t *testing.T) {
	for _, v := range os.Environ() {
		if strings.HasPrefix(v, "SPOOL_") {
			name, _, _ := strings.Cut(v, "=")
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	e, err := (&Exec{Queue: "/q"}).env(&spool.Delivery{File: "a.json", Consumer: "c",
		Message: &spool.Message{MsgID: "m", OrderNo: "o", Seq: 1, Amount: "1", Raw: []byte(`{}`)}}, true)
	if err != nil {
		t.Fatal(err)
	}
	n := (&Notifier{}).env(notification{stored: "a.json", original: "a.json", reason: "parse", msgID: "m"})
	for _, v := range append(e, n...) {
		name, _, _ := strings.Cut(v, "=")
		if strings.HasPrefix(name, "SPOOL_") && !slices.Contains(Vars, name) {
			t.Errorf("a handler sets %s, which Vars does not list", name)
		}
	}
}

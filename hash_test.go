package spool_test

import (
	"testing"

	"github.com/spoolq/spool"
)

func TestContentHash(t *testing.T) {
	for _, c := range []struct{ content, want string }{
		// FIPS 180-2's test vectors, and the empty file.
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{`{"msg_id":"m1"}`, "52ca871c34a2ef627ddc9d2ccb0b0eb1ea3308128ec994def887a2b475cc6c9e"},
	} {
		if got := spool.ContentHash([]byte(c.content)); got != c.want {
			t.Errorf("ContentHash(%q) = %s, want %s", c.content, got, c.want)
		}
	}
}
